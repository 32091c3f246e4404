// Regular-file checks and whole-or-nothing text writers (see files.hpp).
#include "core/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "core/error.hpp"

namespace ridgeline {

std::string not_regular(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return "";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a plain file";
}

std::string temporary_name(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

void write_whole_file(const std::string& path, const void* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error("cannot create '" + path + "': " + std::strerror(errno));
  auto fail = [&](const char* what, int error) {
    std::remove(path.c_str());
    throw Error(std::string(what) + " '" + path + "' failed: " + std::strerror(error));
  };
  const char* bytes = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : ENOSPC;
      ::close(fd);
      fail("writing", error);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    const int error = errno;
    ::close(fd);
    fail("syncing", error);
  }
  if (::close(fd) != 0) fail("closing", errno);
}

void reserve_file_space(const std::string& path, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  // KEEP_SIZE: the blocks are reserved, the file's length (what HDF5 reads as its end) is not.
  const int status = ::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(size));
  const int error = errno;
  ::close(fd);
  if (status != 0 && error != EOPNOTSUPP && error != ENOSYS && error != EINVAL)
    throw Error("cannot reserve " + std::to_string(size) + " bytes for '" + path +
                "': " + std::strerror(error));
}

void write_text_file(const std::string& path, const std::string& text) {
  const std::string kind = not_regular(path);
  if (!kind.empty()) throw Error("'" + path + "' is " + kind + ", not a regular file");
  const std::string temporary = temporary_name(path);
  write_whole_file(temporary, text.data(), text.size());
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temporary.c_str());
    throw Error("renaming '" + temporary + "' onto '" + path + "' failed: " + std::strerror(error));
  }
}

void write_text_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
  std::ostringstream out;
  write(out);
  write_text_file(path, out.str());
}

} // namespace ridgeline
