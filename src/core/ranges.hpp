// Named ranges for profilers: every op, every iteration, every sweep point and collective size
// opens a range with ridgeline's name for it, so Nsight Systems shows those names on the CUDA
// backend (NVTX, domain "ridgeline"). Ranges are RAII scopes: push and pop come in pairs and nest,
// even when an exception leaves a scope. Until a target is turned on (the CUDA backend turns on
// NVTX; a test installs a sink) a scope costs one predictable branch, and with NVTX on but no tool
// attached NVTX itself costs next to nothing.
#pragma once

#include <atomic>
#include <string>
#include <type_traits>

namespace ridgeline::ranges {

/// Receives every range event while installed (a test's recording sink). Called on the thread
/// that opens and closes the range.
class Sink {
public:
  virtual ~Sink() = default;
  virtual void push(const char* name) = 0;
  virtual void pop() = 0;
};

/// Turns NVTX ranges on for the rest of the process (the CUDA backend calls it; a build without
/// NVTX ignores it). Idempotent.
void enable_nvtx();
/// Whether NVTX ranges are on.
bool nvtx_enabled();
/// Test hook: sends every later event to `sink` as well (nullptr: to none); returns the sink it
/// replaces. A range pops on the targets it pushed on, so pairs survive a change of sink.
Sink* set_sink(Sink* sink);

namespace detail {
extern std::atomic<bool> g_active; ///< NVTX on or a sink installed
} // namespace detail

/// Whether any target is on (a range's name need only be built then).
inline bool active() {
  return detail::g_active.load(std::memory_order_relaxed);
}

/// One range: pushed by the constructor, popped by the destructor.
class Scope {
public:
  explicit Scope(const char* name) {
    if (active()) open(name);
  }
  explicit Scope(const std::string& name) : Scope(name.c_str()) {}
  /// A name built by `make_name()` only when a target is on (e.g. "iteration 3").
  template <class MakeName, std::enable_if_t<std::is_invocable_r_v<std::string, MakeName>, int> = 0>
  explicit Scope(MakeName&& make_name) {
    if (active()) open(make_name().c_str());
  }
  ~Scope() {
    if (m_nvtx || m_sink != nullptr) close();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

private:
  void open(const char* name);
  void close() noexcept;
  bool m_nvtx = false;
  Sink* m_sink = nullptr;
};

} // namespace ridgeline::ranges
