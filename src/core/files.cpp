// Regular-file checks and whole-or-nothing text writers (see files.hpp).
#include "core/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "core/error.hpp"

namespace ridgeline {
namespace {

// The live temporaries, for a signal handler: a path is copied in before its slot is marked
// used, and the slot is cleared before the path may change.
constexpr int kSlots = 32;
constexpr size_t kPathBytes = 4096;
char g_paths[kSlots][kPathBytes];
volatile sig_atomic_t g_used[kSlots];

int register_temporary(const std::string& path) {
  if (path.size() >= kPathBytes) return -1;
  for (int i = 0; i < kSlots; ++i) {
    if (g_used[i]) continue;
    std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
    g_used[i] = 1;
    return i;
  }
  return -1; // more live temporaries than slots: the destructor still removes it
}

void unregister_temporary(int slot) {
  if (slot >= 0) g_used[slot] = 0;
}

} // namespace

void remove_temporaries() {
  for (int i = 0; i < kSlots; ++i)
    if (g_used[i]) ::unlink(g_paths[i]);
}

TemporaryFile::TemporaryFile(std::string path)
    : m_path(std::move(path)), m_slot(register_temporary(m_path)) {}

TemporaryFile::~TemporaryFile() {
  if (!m_kept) std::remove(m_path.c_str());
  unregister_temporary(m_slot);
}

void TemporaryFile::rename_to(const std::string& target) {
  if (std::rename(m_path.c_str(), target.c_str()) != 0)
    throw Error(target + ": cannot rename '" + m_path + "' onto it: " + std::strerror(errno));
  m_kept = true;
  unregister_temporary(m_slot);
  m_slot = -1;
}

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
  TemporaryFile temporary(temporary_name(path));
  write_whole_file(temporary.path(), text.data(), text.size());
  temporary.rename_to(path);
}

void write_text_file(const std::string& path, const std::function<void(std::ostream&)>& write) {
  std::ostringstream out;
  write(out);
  write_text_file(path, out.str());
}

} // namespace ridgeline
