// sim::shell_quote and run_capture: a quoted word reaches the command unchanged, whatever it
// holds.
#include "exdyna/sim/shell.hpp"

#include <gtest/gtest.h>

using exdyna::sim::run_capture;
using exdyna::sim::shell_quote;

TEST(Shell, QuotedWordsReachTheCommandUnchanged) {
  for (const std::string s : {"plain", "it's", "a b", "$HOME `x` \"q\" \\n", "''"}) {
    SCOPED_TRACE(s);
    EXPECT_EQ(run_capture("printf '%s' " + shell_quote(s)), s);
  }
}

TEST(Shell, CaptureIsStandardOutputOnly) {
  EXPECT_EQ(run_capture("echo out; echo err >&2"), "out\n");
}
