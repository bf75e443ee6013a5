#include "exdyna/sim/atomic_write.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "exdyna/core/error.hpp"

namespace exdyna::sim {

namespace fs = std::filesystem;

void write_file_atomic(const fs::path& path, const std::string& content) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::string name = ".";  // hidden, beside the target so rename() stays within one file system
  name += path.filename().string();
  name += ".tmp-XXXXXX";
  std::string tmpl = (dir / name).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    throw Error(detail::concat("cannot write '", path.string(), "': creating a temporary file in '",
                               dir.string(), "' failed: ", std::strerror(errno)));
  const char* p = content.data();
  std::size_t left = content.size();
  int err = 0;
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : EIO;
      break;
    }
    p += w;
    left -= static_cast<std::size_t>(w);
  }
  if (!err && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && !err) err = errno;
  // mkstemp makes the file 0600; give it the usual permissions of an output file.
  if (!err && ::chmod(tmpl.c_str(), 0644) != 0) err = errno;
  if (!err && ::rename(tmpl.c_str(), path.c_str()) != 0) err = errno;
  if (err) {
    ::unlink(tmpl.c_str());
    throw Error(detail::concat("cannot write '", path.string(), "': ", std::strerror(err)));
  }
}

}  // namespace exdyna::sim
