#include "exdyna/sim/process_resources.hpp"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>

namespace exdyna::sim {

std::int64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  if (got != 2) return -1;
  return static_cast<std::int64_t>(resident) * static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
}

std::int64_t open_descriptors() {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  std::int64_t n = 0;
  while (const dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the descriptor opendir holds
}

}  // namespace exdyna::sim
