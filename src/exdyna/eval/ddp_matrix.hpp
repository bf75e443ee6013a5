// The DDP head-to-head of `exdyna compare --ddp`: PyTorch DDP training with one communication hook
// per run (DDP's all-reduce, fp16, bf16, PowerSGD, exdyna's hook) over the emulated hosts of
// hosts.hpp, one torchrun node per host namespace (--nnodes W --node_rank i, the rendezvous at
// host 0's address over the shaped links). With ranks_per_host P > 1 each node runs P ranks
// (--nproc_per_node P): they talk over the host's loopback (fast), the hosts over the shaped
// links, which is the layout hybrid sharding (HSDP) is made for: the hooks hsdp (FSDP2 on the 2-D
// mesh (hosts, P), native) and hsdp-exdyna-dX (exdyna.fsdp on the mesh's replicate dimension)
// shard the model over a host's P ranks and replicate it across the hosts. The runs of one
// (workers, bandwidth, model) setting share one launch: the training script (examples/ddp_hooks.py)
// runs the hooks in turn in the same processes (torch is imported and the nodes meet once per
// setting, not once per hook) and writes rank 0's per-step CSV of each. A run that fails ends its
// launch; it keeps the launch's logs and a status file saying why, so the report shows a row for it
// instead of leaving it out, and the hooks after it get a launch of their own.
//
// Layout of the output directory:
//   runs/<model>-<hook>-w<W>-b<rate>/steps.csv    rank 0's steps (the script's format); with P
//                                                  ranks per host the setting is w<W>x<P>
//   runs/<model>-<hook>-w<W>-b<rate>/status.txt   "ok", or "failed: <why>" and the error lines
//   runs/<model>-<hook>-w<W>-b<rate>/rank<i>.err  a failed run: each torchrun node's standard error
//   launches/<model>-w<W>-b<rate>-<k>/            launch k's commands.txt and node logs
// A run whose status.txt says ok is not run again (an interrupted matrix resumes).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace exdyna::eval {

struct DdpOptions {
  std::string python = "python3";   // the interpreter with torch (and exdyna) for the ranks
  std::filesystem::path script;     // examples/ddp_hooks.py
  std::vector<std::string> models;  // cnn, resnet18, lstm, transformer
  // The script's --device: cpu, or cuda (every rank's model and buckets on the GPU of its local
  // rank, still over Gloo: the ranks of a one-GPU machine share it, which NCCL refuses).
  std::string device = "cpu";
  std::vector<std::string> hooks;         // the script's hook names
  std::vector<int> workers;               // hosts per setting
  int ranks_per_host = 1;                 // torchrun's --nproc_per_node on every host
  std::vector<std::uint64_t> bandwidths;  // link rates, bits per second
  // Training steps per model (the same for every hook, so the runs reach the same target).
  // steps_cnn: both image models (cnn, resnet18); steps_lstm: both language models (lstm,
  // transformer).
  int steps_cnn = 150, steps_lstm = 150;
  int eval_every = 10;
  // Training seconds after which a run stops at its next evaluation (0: none): every hook gets
  // the same time, and a dense hook on a slow link does not hold the matrix for many minutes.
  double budget_s = 0;
  std::vector<std::string> script_args;  // more arguments for every run (e.g. --vocab 2000)
  double delay_us = 50;
  double timeout_s = 600;  // per run, start to end (a launch of n runs gets n times this)
  int seeds = 1;           // each run with the script's --seed 0 .. seeds - 1
  std::filesystem::path out_dir;
};

// The hooks of the default head-to-head, in the report's order.
std::vector<std::string> default_ddp_hooks();
// "cnn", "resnet18", "lstm" or "transformer", else InvalidArgument naming the value; a hook name
// the script accepts (allreduce, fp16, bf16, powersgd-rN, exdyna-dX, exdyna-sync-dX, hsdp,
// hsdp-exdyna-dX), else InvalidArgument.
void check_ddp_model(const std::string& model);
void check_ddp_hook(const std::string& hook);
// "cpu" or "cuda" (the script's --device), else InvalidArgument naming the value.
void check_ddp_device(const std::string& device);
// Whether the model trains on Fashion-MNIST (cnn, resnet18): it takes the image models' steps.
bool is_image_model(const std::string& model);
// Whether the hook shards the model with FSDP2 (hsdp, hsdp-exdyna-dX).
bool is_hsdp_hook(const std::string& hook);
// An HSDP hook needs a shard group inside each host (ranks_per_host >= 2) and the model the
// script shards (transformer); else InvalidArgument naming the hook and what it needs.
void check_hsdp_setting(const std::vector<std::string>& hooks,
                        const std::vector<std::string>& models, int ranks_per_host);

// The run's directory name: <model>-<hook>-w<W>-b<rate>, w<W>x<P> with P > 1 ranks per host,
// and -s<seed> for seeds after the first (seed 0's name is the one a single-seed run has always
// had).
std::string ddp_run_name(const std::string& model, const std::string& hook, int workers,
                         std::uint64_t bps, int seed = 0, int ranks_per_host = 1);

// Host `node`'s torchrun launcher, up to the script: interpreter, torch.distributed.run and its
// options (--nnodes hosts, --node_rank node, --nproc_per_node o.ranks_per_host, the rendezvous at
// master_addr:port).
std::vector<std::string> torchrun_argv(const DdpOptions& o, int hosts, int node,
                                       const std::string& master_addr, int port);

struct DdpMatrixResult {
  int ran = 0, kept = 0, failed = 0;
  std::vector<std::string> failures;  // "<run>: <why>"
  double wall_s = 0;
};

// Runs every (workers, bandwidth, model, hook) over emulated hosts (needs network namespaces:
// netns_unavailable_reason() is empty). progress gets one line per run.
DdpMatrixResult run_ddp_matrix(const DdpOptions& o,
                               const std::function<void(const std::string&)>& progress);

// The first line of a failed rank's standard error that names an error (an exception's last
// line, gloo's enforce message), else the last non-empty line; "" for an empty log.
std::string ddp_failure_line(const std::string& stderr_text);

}  // namespace exdyna::eval
