// Running a shell command and quoting its arguments: the gnuplot figures of `exdyna train` and of
// `exdyna compare` both run gnuplot this way (one home, since eval may be built without train).
#pragma once

#include <string>

namespace exdyna::sim {

// s as one single-quoted POSIX shell word ('it'\''s').
std::string shell_quote(const std::string& s);

// Runs cmd with /bin/sh and returns its standard output (empty when it cannot be started).
std::string run_capture(const std::string& cmd);

}  // namespace exdyna::sim
