// The static NVTX injection (see nvtx_capture.hpp): NVTX's weak InitializeInjectionNvtx2_fnptr
// binds to the definition below, and its initialiser points NVTX's domain functions at ours.
#include "nvtx_capture.hpp"

#include <cstdint>

// NVTX's loader refers to the symbol, and with NVTX_STATIC_INJECTION_IMPL leaves declaring it to
// the injection: declared here (NVTX's own function-pointer type), defined at the end.
extern "C" {
extern int (*InitializeInjectionNvtx2_fnptr)(const void* (*)(uint32_t));
}
#define NVTX_STATIC_INJECTION_IMPL
#include <nvtx3/nvToolsExt.h>

#include <memory>
#include <mutex>

namespace ridgeline::nvtx_capture {
namespace {

struct Domain {
  std::string name;
};

std::mutex g_mutex;
std::vector<Event> g_events;
std::vector<std::unique_ptr<Domain>> g_domains;
bool g_attached = false;

std::string domain_name(nvtxDomainHandle_t domain) {
  return domain ? reinterpret_cast<Domain*>(domain)->name : std::string();
}

nvtxDomainHandle_t NVTX_API domain_create(const char* name) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_domains.push_back(std::make_unique<Domain>(Domain{name ? name : ""}));
  return reinterpret_cast<nvtxDomainHandle_t>(g_domains.back().get());
}

int NVTX_API range_push(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attrs) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::string name;
  if (attrs && attrs->messageType == NVTX_MESSAGE_TYPE_ASCII && attrs->message.ascii)
    name = attrs->message.ascii;
  g_events.push_back({true, domain_name(domain), name});
  return 0;
}

int NVTX_API range_pop(nvtxDomainHandle_t domain) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_events.push_back({false, domain_name(domain), ""});
  return 0;
}

int NVTX_API initialize(NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
      size <= NVTX_CBID_CORE2_DomainCreateA)
    return 0;
  *table[NVTX_CBID_CORE2_DomainCreateA] = reinterpret_cast<NvtxFunctionPointer>(&domain_create);
  *table[NVTX_CBID_CORE2_DomainRangePushEx] = reinterpret_cast<NvtxFunctionPointer>(&range_push);
  *table[NVTX_CBID_CORE2_DomainRangePop] = reinterpret_cast<NvtxFunctionPointer>(&range_pop);
  g_attached = true;
  return 1;
}

} // namespace

std::vector<Event> events() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_events;
}

void clear() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_events.clear();
}

bool attached() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_attached;
}

} // namespace ridgeline::nvtx_capture

extern "C" {
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr =
    &ridgeline::nvtx_capture::initialize;
}
