// The DDP head-to-head's pieces that need no hosts: hook and model names, the HSDP hooks' setting,
// run names, the torchrun launcher, and the line a failed run's report row quotes from its rank's
// standard error.
#include "exdyna/eval/ddp_matrix.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <initializer_list>

#include "exdyna/core/error.hpp"

namespace exdyna::eval {
namespace {

TEST(DdpMatrix, AcceptsEveryDefaultHookAndRefusesOthersByName) {
  for (const auto& h : default_ddp_hooks()) EXPECT_NO_THROW(check_ddp_hook(h)) << h;
  for (const char* h : {"exdyna-d1", "exdyna-sync-d0.5", "powersgd-r12", "hsdp",
                        "hsdp-exdyna-d0.01", "hsdp-exdyna-d0.001"})
    EXPECT_NO_THROW(check_ddp_hook(h)) << h;
  for (const char* h :
       {"gzip", "powersgd-r0", "exdyna-d0", "exdyna-d1.5", "exdyna-d0.0", "fp32", "exdyna",
        "hsdp-exdyna", "hsdp-d0.01", "hsdp-exdyna-sync-d0.01", "hsdp-exdyna-d2"}) {
    try {
      check_ddp_hook(h);
      ADD_FAILURE() << h << " was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + h + "'"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW(check_ddp_model("lstm"));
  EXPECT_NO_THROW(check_ddp_model("transformer"));
  EXPECT_NO_THROW(check_ddp_model("resnet18"));
  EXPECT_THROW(check_ddp_model("resnet"), InvalidArgument);
}

// Throws InvalidArgument whose message holds every one of words.
template <class F>
void expect_refused(F f, std::initializer_list<const char*> words) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected a refusal naming " << *words.begin();
  } catch (const InvalidArgument& e) {
    for (const char* w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
  }
}

TEST(DdpMatrix, HsdpHooksNeedRanksPerHostAndTheTransformer) {
  const std::vector<std::string> t{"transformer"};
  EXPECT_TRUE(is_hsdp_hook("hsdp") && is_hsdp_hook("hsdp-exdyna-d0.01"));
  EXPECT_FALSE(is_hsdp_hook("exdyna-d0.01") || is_hsdp_hook("allreduce"));
  EXPECT_NO_THROW(check_hsdp_setting({"hsdp", "hsdp-exdyna-d0.01"}, t, 2));
  EXPECT_NO_THROW(check_hsdp_setting({"allreduce", "exdyna-d0.01"}, {"cnn"}, 1));
  EXPECT_NO_THROW(check_hsdp_setting({"allreduce"}, {"cnn"}, 2));  // DDP over every rank
  expect_refused(
      [&] {
        check_hsdp_setting({"allreduce", "hsdp-exdyna-d0.01"}, t, 1);
      },
      {"hsdp-exdyna-d0.01", "--ddp-ranks-per-host 2 or more", "(it is 1)"});
  expect_refused(
      [&] {
        check_hsdp_setting({"hsdp"}, {"transformer", "lstm"}, 2);
      },
      {"--ddp-hooks hsdp", "--ddp-models transformer", "'lstm'"});
}

TEST(DdpMatrix, DeviceIsCpuOrCudaAndOthersAreRefusedByName) {
  EXPECT_NO_THROW(check_ddp_device("cpu"));
  EXPECT_NO_THROW(check_ddp_device("cuda"));
  for (const char* d : {"gpu", "CUDA", "cuda:0", "", "mps"})
    expect_refused([&] { check_ddp_device(d); },
                   {"--ddp-device", (std::string("'") + d + "'").c_str(), "expected cpu or cuda"});
}

TEST(DdpMatrix, ResNetIsAnImageModelAsTheCnn) {
  EXPECT_TRUE(is_image_model("cnn") && is_image_model("resnet18"));
  EXPECT_FALSE(is_image_model("lstm") || is_image_model("transformer"));
}

TEST(DdpMatrix, TorchrunRunsRanksPerHostOnEveryNode) {
  DdpOptions o;
  o.python = "/venv/bin/python";
  o.ranks_per_host = 2;
  const auto argv = torchrun_argv(o, 3, 1, "10.213.7.1", 29601);
  auto after = [&](const std::string& flag) {
    for (std::size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == flag) return argv[i + 1];
    return std::string("(no ") + flag + ")";
  };
  EXPECT_EQ(argv.front(), "/venv/bin/python");
  EXPECT_EQ(after("-m"), "torch.distributed.run");
  EXPECT_EQ(after("--nproc_per_node"), "2");
  EXPECT_EQ(after("--nnodes"), "3");
  EXPECT_EQ(after("--node_rank"), "1");
  EXPECT_EQ(after("--master_addr"), "10.213.7.1");
  EXPECT_EQ(after("--master_port"), "29601");
  o.ranks_per_host = 1;
  const auto one = torchrun_argv(o, 3, 0, "10.213.7.1", 29601);
  EXPECT_EQ(std::find(one.begin(), one.end(), "--nproc_per_node")[1], "1");
}

TEST(DdpMatrix, RunNameNamesEverySetting) {
  EXPECT_EQ(ddp_run_name("lstm", "powersgd-r4", 4, 100'000'000), "lstm-powersgd-r4-w4-b100mbit");
  // Seed 0 keeps the single-seed name (earlier output directories resume); later seeds add -sN.
  EXPECT_EQ(ddp_run_name("cnn", "allreduce", 2, 1'000'000'000, 0), "cnn-allreduce-w2-b1gbit");
  EXPECT_EQ(ddp_run_name("cnn", "allreduce", 2, 1'000'000'000, 3), "cnn-allreduce-w2-b1gbit-s3");
  // Ranks per host are part of the setting; 1 keeps the name of a run without them.
  EXPECT_EQ(ddp_run_name("transformer", "hsdp", 2, 100'000'000, 1, 2),
            "transformer-hsdp-w2x2-b100mbit-s1");
  EXPECT_EQ(ddp_run_name("cnn", "allreduce", 2, 1'000'000'000, 0, 1), "cnn-allreduce-w2-b1gbit");
}

TEST(DdpMatrix, FailureLineIsTheCauseNotTorchrunsSummary) {
  const std::string err =
      "Traceback (most recent call last):\n"
      "  File \"x.py\", line 3, in <module>\n"
      "RuntimeError: [enforce fail at gloo/transport/tcp/pair.cc:446] op.preamble.length <= "
      "op.nbytes. 5000 vs 1600\n"
      "\n"
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
      "==========\n";
  EXPECT_EQ(ddp_failure_line(err),
            "RuntimeError: [enforce fail at gloo/transport/tcp/pair.cc:446] op.preamble.length <= "
            "op.nbytes. 5000 vs 1600");
  // torch 2.x: the worker's lines carry its rank, the launcher's summary ends with a rule.
  EXPECT_EQ(ddp_failure_line("[rank0]: Traceback (most recent call last):\n"
                             "[rank0]: RuntimeError: gradient element 0 is -nan\n"
                             "E1127 06:25:00.309000 773 api.py:986] failed (exitcode: 1)\n"
                             "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
                             "===========\n"),
            "RuntimeError: gradient element 0 is -nan");
  EXPECT_EQ(ddp_failure_line("just a line\n\n"), "just a line");
  EXPECT_EQ(ddp_failure_line(""), "");
}

}  // namespace
}  // namespace exdyna::eval
