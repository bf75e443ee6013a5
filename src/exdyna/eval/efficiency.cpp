#include "exdyna/eval/efficiency.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "exdyna/core/atomic_file.hpp"
#include "exdyna/core/error.hpp"
#include "exdyna/eval/measurements.hpp"

namespace exdyna::eval {

namespace fs = std::filesystem;

namespace {

// Runs argv with stdout and stderr into log; returns the exit status (or 128 + signal).
int run_to_log(const std::vector<std::string>& argv, const fs::path& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  EXDYNA_CHECK(pid >= 0, "efficiency: fork failed for ", argv.front());
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

std::string tail_of(const fs::path& file, std::size_t chars) {
  std::ifstream in(file);
  std::ostringstream os;
  os << in.rdbuf();
  auto s = os.str();
  return s.size() > chars ? s.substr(s.size() - chars) : s;
}

// A word as a POSIX shell reads it back (quoted only when it needs to be).
std::string shell_word(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_./=,:+") == std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void validate(const EfficiencyOptions& o) {
  EXDYNA_CHECK_ARG(o.workload == "cnn" || o.workload == "lstm", "--train-workload '", o.workload,
                   "' is not valid; expected cnn or lstm");
  EXDYNA_CHECK_ARG(o.workers >= 1, "--train-workers ", o.workers, " is not valid; expected >= 1");
  EXDYNA_CHECK_ARG(o.epochs >= 0, "--train-epochs ", o.epochs,
                   " is not valid; expected >= 1 (0: the workload's default)");
  EXDYNA_CHECK_ARG(o.density > 0 && o.density <= 1, "--train-density ", o.density,
                   " is not valid; expected in (0, 1]");
  EXDYNA_CHECK_ARG(!o.labels.empty(), "efficiency: no labels to train");
}

}  // namespace

int epochs_of(const EfficiencyOptions& o) {
  if (o.epochs > 0) return o.epochs;
  return o.workload == "lstm" ? 3 : 4;
}

std::vector<std::string> train_command(const EfficiencyOptions& o, const std::string& label,
                                       const fs::path& run_dir) {
  std::vector<std::string> a = {o.exdyna_binary.string(), "train"};
  if (label == "exdyna-exact")
    a.insert(a.end(), {"--sparsifier", "exdyna", "--controller", "exact", "--balance", "exact",
                       "--worker-cap", "auto"});
  else if (label == "exdyna-paper")
    a.insert(a.end(), {"--sparsifier", "exdyna", "--controller", "paper", "--balance", "paper"});
  else
    a.insert(a.end(), {"--sparsifier", label});
  if (o.workload == "lstm") a.insert(a.end(), {"--model", "lstm", "--dataset", "text"});
  a.insert(a.end(),
           {"--workers", std::to_string(o.workers), "--density", num_text(o.density), "--epochs",
            std::to_string(epochs_of(o)), "--batch-size", std::to_string(o.batch_size)});
  if (o.train_limit > 0) a.insert(a.end(), {"--train-limit", std::to_string(o.train_limit)});
  if (o.test_limit > 0) a.insert(a.end(), {"--test-limit", std::to_string(o.test_limit)});
  if (o.max_steps > 0) a.insert(a.end(), {"--max-steps", std::to_string(o.max_steps)});
  if (!o.data_dir.empty()) a.insert(a.end(), {"--data-dir", o.data_dir});
  a.insert(a.end(), {"--out", run_dir.string(), "--no-plots", "--no-progress"});
  a.insert(a.end(), o.extra_args.begin(), o.extra_args.end());
  return a;
}

std::string efficiency_rows(const std::string& workload, const std::string& label,
                            const fs::path& eval_csv) {
  const auto t = CsvTable::read(eval_csv, {"epoch", "step", "test_accuracy", "test_perplexity"});
  std::ostringstream os;
  for (std::size_t r = 0; r < t.rows(); ++r) {
    const double acc = t.num(r, "test_accuracy"), ppl = t.num(r, "test_perplexity");
    const bool is_acc = std::isfinite(acc);
    os << workload << ',' << label << ',' << t.text(r, "step") << ',' << t.text(r, "epoch") << ','
       << (is_acc ? "test_accuracy" : "perplexity") << ',' << num_text(is_acc ? acc : ppl) << '\n';
  }
  return os.str();
}

EfficiencyResult run_efficiency(const EfficiencyOptions& o, const fs::path& out_dir,
                                const EfficiencyProgress& progress) {
  validate(o);
  EXDYNA_CHECK_ARG(fs::exists(o.exdyna_binary), "efficiency: the exdyna binary '",
                   o.exdyna_binary.string(), "' does not exist");
  fs::create_directories(out_dir / "train");
  EfficiencyResult res;
  res.csv = out_dir / "efficiency.csv";
  const auto t0 = std::chrono::steady_clock::now();
  std::string rows;
  for (std::size_t i = 0; i < o.labels.size(); ++i) {
    const auto& label = o.labels[i];
    const auto dir = out_dir / "train" / (o.workload + "-" + label);
    fs::remove_all(dir);
    fs::create_directories(dir);
    const auto argv = train_command(o, label, dir);
    if (progress) {
      std::ostringstream line;
      line << "train " << o.workload << ' ' << label << " (" << i + 1 << '/' << o.labels.size()
           << ")";
      progress(line.str());
    }
    std::string cmd;
    for (const auto& a : argv) {
      if (!cmd.empty()) cmd += ' ';
      cmd += shell_word(a);
    }
    core::write_file_atomic(dir / "command.txt", cmd + "\n");
    const int rc = run_to_log(argv, dir / "train.log");
    const auto eval = dir / "eval.csv";
    if (rc != 0 || !fs::exists(eval)) {
      res.failed.push_back(label + ": exit status " + std::to_string(rc) + "; " +
                           tail_of(dir / "train.log", 300));
      continue;
    }
    rows += efficiency_rows(o.workload, label, eval);
  }
  // Keep other workloads' rows from an earlier call.
  std::string kept;
  if (fs::exists(res.csv)) {
    const auto old =
        CsvTable::read(res.csv, {"workload", "label", "step", "epoch", "metric", "value"});
    for (std::size_t r = 0; r < old.rows(); ++r)
      if (old.text(r, "workload") != o.workload)
        kept += old.text(r, "workload") + ',' + old.text(r, "label") + ',' + old.text(r, "step") +
                ',' + old.text(r, "epoch") + ',' + old.text(r, "metric") + ',' +
                old.text(r, "value") + '\n';
  }
  core::write_file_atomic(res.csv, "workload,label,step,epoch,metric,value\n" + kept + rows);
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace exdyna::eval
