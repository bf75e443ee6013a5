// The DDP head-to-head's pieces that need no hosts: hook and model names, run names, and the
// line a failed run's report row quotes from its rank's standard error.
#include "exdyna/eval/ddp_matrix.hpp"

#include <gtest/gtest.h>

#include "exdyna/core/error.hpp"

namespace exdyna::eval {
namespace {

TEST(DdpMatrix, AcceptsEveryDefaultHookAndRefusesOthersByName) {
  for (const auto& h : default_ddp_hooks()) EXPECT_NO_THROW(check_ddp_hook(h)) << h;
  for (const char* h : {"exdyna-d1", "exdyna-sync-d0.5", "powersgd-r12"})
    EXPECT_NO_THROW(check_ddp_hook(h)) << h;
  for (const char* h :
       {"gzip", "powersgd-r0", "exdyna-d0", "exdyna-d1.5", "exdyna-d0.0", "fp32", "exdyna"}) {
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
  EXPECT_THROW(check_ddp_model("resnet"), InvalidArgument);
}

TEST(DdpMatrix, RunNameNamesEverySetting) {
  EXPECT_EQ(ddp_run_name("lstm", "powersgd-r4", 4, 100'000'000), "lstm-powersgd-r4-w4-b100mbit");
  // Seed 0 keeps the single-seed name (earlier output directories resume); later seeds add -sN.
  EXPECT_EQ(ddp_run_name("cnn", "allreduce", 2, 1'000'000'000, 0), "cnn-allreduce-w2-b1gbit");
  EXPECT_EQ(ddp_run_name("cnn", "allreduce", 2, 1'000'000'000, 3), "cnn-allreduce-w2-b1gbit-s3");
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
