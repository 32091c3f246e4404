// Files as the tools meet them: what a path is when it is not a regular file (a FIFO would block
// a reader or a writer forever), and text files written whole or not at all.
#pragma once

#include <cstddef>
#include <functional>
#include <ostream>
#include <string>
#include <utility>

namespace ridgeline {

/// What `path` is when it exists and is not a regular file ("a FIFO", "a directory", "a device",
/// "a socket", "not a plain file"); "" for a regular file and for a path that does not exist.
/// Links are followed.
std::string not_regular(const std::string& path);

/// The temporary name a writer uses beside `path` before renaming onto it.
std::string temporary_name(const std::string& path);

/// Writes `size` bytes to `path` (created or truncated), every write, the fsync and the close
/// checked; on failure `path` is removed and Error names the reason.
void write_whole_file(const std::string& path, const void* data, size_t size);

/// Makes sure the first `size` bytes of the existing file `path` have space on the filesystem
/// (fallocate, which never changes the contents), so that a writer filling them later cannot
/// meet a full filesystem halfway. Throws Error when the space is not there; does nothing where
/// the filesystem cannot reserve space.
void reserve_file_space(const std::string& path, size_t size);

/// A file that exists only until it is renamed into place: removed by the destructor unless
/// kept, and by remove_temporaries() (a signal handler's) while it is alive.
class TemporaryFile {
public:
  explicit TemporaryFile(std::string path);
  ~TemporaryFile();
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  const std::string& path() const { return m_path; }
  /// Renames the file onto `target` and keeps it; throws Error naming both on failure.
  void rename_to(const std::string& target);

private:
  std::string m_path;
  int m_slot = -1;
  bool m_kept = false;
};

/// Removes every live TemporaryFile's file; async-signal-safe (unlink only).
void remove_temporaries();

/// Writes `text` to `path` whole or not at all: into temporary_name(path), every write, the
/// fsync and the close checked, then renamed onto `path`. On any failure the temporary file is
/// removed, `path` is left as it was and Error names the reason (a full filesystem, a quota).
void write_text_file(const std::string& path, const std::string& text);

/// write_text_file() of what `write` puts into a stream.
void write_text_file(const std::string& path, const std::function<void(std::ostream&)>& write);

} // namespace ridgeline
