// Profiler ranges (see ranges.hpp): NVTX in CUDA builds, and the test hook.
#include "ranges.hpp"

#if RIDGELINE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace ridgeline::ranges {
namespace detail {
std::atomic<bool> g_active{false};
} // namespace detail

namespace {

std::atomic<bool> g_nvtx{false};
std::atomic<Sink*> g_sink{nullptr};

void update_active() {
  detail::g_active.store(g_nvtx.load() || g_sink.load() != nullptr, std::memory_order_relaxed);
}

#if RIDGELINE_HAVE_NVTX
// One domain, so that a tool can show or hide ridgeline's ranges as a group.
nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("ridgeline");
  return d;
}
#endif

} // namespace

void enable_nvtx() {
#if RIDGELINE_HAVE_NVTX
  domain();
  g_nvtx.store(true);
  update_active();
#endif
}

bool nvtx_enabled() {
  return g_nvtx.load();
}

Sink* set_sink(Sink* sink) {
  Sink* previous = g_sink.exchange(sink);
  update_active();
  return previous;
}

void Scope::open(const char* name) {
#if RIDGELINE_HAVE_NVTX
  if (g_nvtx.load(std::memory_order_relaxed)) {
    nvtxEventAttributes_t attrs{};
    attrs.version = NVTX_VERSION;
    attrs.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attrs.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attrs.message.ascii = name;
    nvtxDomainRangePushEx(domain(), &attrs);
    m_nvtx = true;
  }
#endif
  m_sink = g_sink.load(std::memory_order_relaxed);
  if (m_sink != nullptr) m_sink->push(name);
}

void Scope::close() noexcept {
  if (m_sink != nullptr) m_sink->pop();
#if RIDGELINE_HAVE_NVTX
  if (m_nvtx) nvtxDomainRangePop(domain());
#endif
}

} // namespace ridgeline::ranges
