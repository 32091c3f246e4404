// GPU facts for /topology and /stack: the CUDA runtime for what it knows, NVML (opened at run
// time with dlopen, so the binary runs where NVML is missing) for clocks, power, ECC and links.
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <strings.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "core/cuda_check.hpp"
#include "core/version.hpp"
#include "models/cuda_backend.hpp"

namespace ridgeline {
namespace {

// The few NVML declarations used, restated from NVML's stable C ABI (no nvml.h at build time).
using NvmlDevice = struct NvmlDeviceOpaque*;
using NvmlReturn = int; // NVML_SUCCESS == 0
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;                  // NVML_CLOCK_SM
constexpr int kNvmlClockMem = 2;                 // NVML_CLOCK_MEM
constexpr int kNvmlP2pCapsNvlink = 2;            // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int kNvmlP2pStatusOk = 0;              // NVML_P2P_STATUS_OK
constexpr unsigned kNvmlMaxLinks = 18;           // NVML_NVLINK_MAX_LINKS (Hopper)
constexpr int kNvmlTemperatureGpu = 0;           // NVML_TEMPERATURE_GPU
constexpr unsigned kNvmlFieldPowerInstant = 186; // NVML_FI_DEV_POWER_INSTANT (mW)

struct NvmlFieldValue { // nvmlFieldValue_t
  unsigned field_id;
  unsigned scope_id;
  long long timestamp_us;
  long long latency_us;
  int value_type; // nvmlValueType_t: 0 double, 1 uint, 2 ulong, 3 ulonglong, 4 slonglong, 5 int
  int nvml_return;
  union {
    double d;
    unsigned ui;
    unsigned long ul;
    unsigned long long ull;
    long long sll;
    int si;
  } value;
};

struct NvmlPciInfo { // nvmlPciInfo_t
  char bus_id_legacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pci_device_id;
  unsigned pci_subsystem_id;
  char bus_id[32];
};

/// NVML loaded with dlopen; every entry point may be missing (then the fact stays unknown).
class Nvml {
public:
  Nvml() {
    m_lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (m_lib == nullptr) return;
    load(m_init, "nvmlInit_v2");
    load(m_shutdown, "nvmlShutdown");
    load(m_by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    load(m_name, "nvmlDeviceGetName");
    load(m_uuid, "nvmlDeviceGetUUID");
    load(m_clock, "nvmlDeviceGetClockInfo");
    load(m_max_clock, "nvmlDeviceGetMaxClockInfo");
    load(m_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    load(m_ecc, "nvmlDeviceGetEccMode");
    load(m_link_state, "nvmlDeviceGetNvLinkState");
    load(m_link_remote, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    load(m_p2p, "nvmlDeviceGetP2PStatus");
    load(m_common_ancestor, "nvmlDeviceGetTopologyCommonAncestor");
    load(m_driver, "nvmlSystemGetDriverVersion");
    load(m_power, "nvmlDeviceGetPowerUsage");
    load(m_fields, "nvmlDeviceGetFieldValues");
    load(m_temperature, "nvmlDeviceGetTemperature");
    load(m_reasons, "nvmlDeviceGetCurrentClocksEventReasons");
    if (m_reasons == nullptr) // the name before NVML 12.2
      load(m_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    m_ok = m_init != nullptr && m_init() == kNvmlSuccess;
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  ~Nvml() {
    if (m_ok && m_shutdown != nullptr) m_shutdown();
    if (m_lib != nullptr) dlclose(m_lib);
  }

  bool ok() const { return m_ok; }

  /// The NVML handle of CUDA device `device` (matched by PCI bus id, since the orders differ).
  NvmlDevice device(int cuda_device) const {
    char bus[32] = {};
    NvmlDevice dev = nullptr;
    if (!m_ok || m_by_pci == nullptr ||
        cudaDeviceGetPCIBusId(bus, sizeof(bus), cuda_device) != cudaSuccess ||
        m_by_pci(bus, &dev) != kNvmlSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return dev;
  }

  std::string name(NvmlDevice d) const { return text(m_name, d); }
  std::string uuid(NvmlDevice d) const { return text(m_uuid, d); }
  int clock(NvmlDevice d, int type) const { return value(m_clock, d, type); }
  int max_clock(NvmlDevice d, int type) const { return value(m_max_clock, d, type); }
  double power_limit_w(NvmlDevice d) const { return watts(m_power_limit, d); }
  int ecc(NvmlDevice d) const {
    int current = 0, pending = 0;
    if (m_ecc == nullptr || m_ecc(d, &current, &pending) != kNvmlSuccess) return -1;
    return current != 0 ? 1 : 0;
  }
  /// Board power averaged by the driver (over one second on Ampere and newer).
  double power_avg_w(NvmlDevice d) const { return watts(m_power, d); }
  /// Board power now (NVML_FI_DEV_POWER_INSTANT), or -1 where the driver lacks the field.
  double power_instant_w(NvmlDevice d) const {
    NvmlFieldValue f{};
    f.field_id = kNvmlFieldPowerInstant;
    if (m_fields == nullptr || m_fields(d, 1, &f) != kNvmlSuccess || f.nvml_return != kNvmlSuccess)
      return -1;
    switch (f.value_type) {
    case 0:
      return f.value.d / 1000.0;
    case 1:
      return f.value.ui / 1000.0;
    case 2:
      return static_cast<double>(f.value.ul) / 1000.0;
    case 3:
      return static_cast<double>(f.value.ull) / 1000.0;
    case 4:
      return static_cast<double>(f.value.sll) / 1000.0;
    case 5:
      return f.value.si / 1000.0;
    default:
      return -1;
    }
  }
  double temperature_c(NvmlDevice d) const {
    unsigned c = 0;
    if (m_temperature == nullptr || m_temperature(d, kNvmlTemperatureGpu, &c) != kNvmlSuccess)
      return -1;
    return c;
  }
  int64_t clock_event_reasons(NvmlDevice d) const {
    unsigned long long bits = 0;
    if (m_reasons == nullptr || m_reasons(d, &bits) != kNvmlSuccess) return -1;
    return static_cast<int64_t>(bits);
  }
  std::string driver() const {
    char buf[96] = {};
    if (!m_ok || m_driver == nullptr || m_driver(buf, sizeof(buf)) != kNvmlSuccess) return {};
    return buf;
  }

  /// Active NVLinks of `d` (to anything).
  int active_links(NvmlDevice d) const {
    if (m_link_state == nullptr) return 0;
    int n = 0;
    for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
      int active = 0;
      if (m_link_state(d, link, &active) == kNvmlSuccess && active != 0) ++n;
    }
    return n;
  }
  /// Active NVLinks of `a` whose far end is the GPU at PCI bus id `peer_bus`.
  int direct_links(NvmlDevice a, const std::string& peer_bus) const {
    if (m_link_state == nullptr || m_link_remote == nullptr) return 0;
    int n = 0;
    for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
      int active = 0;
      NvmlPciInfo pci{};
      if (m_link_state(a, link, &active) == kNvmlSuccess && active != 0 &&
          m_link_remote(a, link, &pci) == kNvmlSuccess && same_bus(pci.bus_id, peer_bus))
        ++n;
    }
    return n;
  }
  bool nvlink_p2p(NvmlDevice a, NvmlDevice b) const {
    int status = -1;
    return m_p2p != nullptr && m_p2p(a, b, kNvmlP2pCapsNvlink, &status) == kNvmlSuccess &&
           status == kNvmlP2pStatusOk;
  }
  /// nvidia-smi's PCIe path class between two GPUs, or "" when unknown.
  std::string pcie_path(NvmlDevice a, NvmlDevice b) const {
    int level = -1;
    if (m_common_ancestor == nullptr || m_common_ancestor(a, b, &level) != kNvmlSuccess) return {};
    switch (level) { // nvmlGpuTopologyLevel_t
    case 0:
      return "X";
    case 10:
      return "PIX";
    case 20:
      return "PXB";
    case 30:
      return "PHB";
    case 40:
      return "NODE";
    case 50:
      return "SYS";
    default:
      return {};
    }
  }

private:
  template <typename F> void load(F& fn, const char* symbol) {
    fn = reinterpret_cast<F>(dlsym(m_lib, symbol));
  }
  using TextFn = NvmlReturn (*)(NvmlDevice, char*, unsigned);
  using ClockFn = NvmlReturn (*)(NvmlDevice, int, unsigned*);
  std::string text(TextFn fn, NvmlDevice d) const {
    char buf[96] = {};
    if (fn == nullptr || fn(d, buf, sizeof(buf)) != kNvmlSuccess) return {};
    return buf;
  }
  using MilliwattFn = NvmlReturn (*)(NvmlDevice, unsigned*);
  static double watts(MilliwattFn fn, NvmlDevice d) {
    unsigned mw = 0;
    if (fn == nullptr || fn(d, &mw) != kNvmlSuccess) return -1;
    return mw / 1000.0;
  }
  int value(ClockFn fn, NvmlDevice d, int type) const {
    unsigned v = 0;
    if (fn == nullptr || fn(d, type, &v) != kNvmlSuccess) return -1;
    return static_cast<int>(v);
  }
  // NVML prints "00000000:19:00.0", CUDA "0000:19:00.0": compare after the domain.
  static bool same_bus(const char* nvml_bus, const std::string& cuda_bus) {
    const char* a = std::strchr(nvml_bus, ':');
    const size_t colon = cuda_bus.find(':');
    if (a == nullptr || colon == std::string::npos) return false;
    return strcasecmp(a, cuda_bus.c_str() + colon) == 0;
  }

  void* m_lib = nullptr;
  bool m_ok = false;
  NvmlReturn (*m_init)() = nullptr;
  NvmlReturn (*m_shutdown)() = nullptr;
  NvmlReturn (*m_by_pci)(const char*, NvmlDevice*) = nullptr;
  TextFn m_name = nullptr;
  TextFn m_uuid = nullptr;
  ClockFn m_clock = nullptr;
  ClockFn m_max_clock = nullptr;
  MilliwattFn m_power_limit = nullptr;
  NvmlReturn (*m_ecc)(NvmlDevice, int*, int*) = nullptr;
  NvmlReturn (*m_link_state)(NvmlDevice, unsigned, int*) = nullptr;
  NvmlReturn (*m_link_remote)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
  NvmlReturn (*m_p2p)(NvmlDevice, NvmlDevice, int, int*) = nullptr;
  NvmlReturn (*m_common_ancestor)(NvmlDevice, NvmlDevice, int*) = nullptr;
  NvmlReturn (*m_driver)(char*, unsigned) = nullptr;
  MilliwattFn m_power = nullptr;
  NvmlReturn (*m_fields)(NvmlDevice, int, NvmlFieldValue*) = nullptr;
  NvmlReturn (*m_temperature)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*m_reasons)(NvmlDevice, unsigned long long*) = nullptr;
};

std::string bus_id(int device) {
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  return bus;
}

} // namespace

GpuInfo query_gpu(int device) {
  GpuInfo info;
  info.device = device;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return info;
  }
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.memory_total_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.pci_bus_id = bus_id(device);
  int previous = 0;
  size_t free_bytes = 0, total_bytes = 0;
  // cudaMemGetInfo reports on the current device: switch briefly and restore.
  if (cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(device) == cudaSuccess &&
      cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
    info.memory_free_bytes = static_cast<int64_t>(free_bytes);
  cudaSetDevice(previous);
  cudaGetLastError();

  const Nvml nvml;
  NvmlDevice dev = nvml.device(device);
  if (dev == nullptr) return info;
  const std::string name = nvml.name(dev);
  if (!name.empty()) info.name = name;
  info.uuid = nvml.uuid(dev);
  info.sm_clock_mhz = nvml.clock(dev, kNvmlClockSm);
  info.mem_clock_mhz = nvml.clock(dev, kNvmlClockMem);
  info.sm_clock_max_mhz = nvml.max_clock(dev, kNvmlClockSm);
  info.mem_clock_max_mhz = nvml.max_clock(dev, kNvmlClockMem);
  info.power_limit_w = nvml.power_limit_w(dev);
  info.ecc_enabled = nvml.ecc(dev);
  return info;
}

std::vector<std::pair<std::string, std::string>> cuda_stack_versions() {
  std::vector<std::pair<std::string, std::string>> out;
  auto cuda_version = [](int v) {
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  };
  {
    const Nvml nvml;
    const std::string driver = nvml.driver();
    if (!driver.empty()) out.emplace_back("driver", driver);
  }
  int driver_api = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver_api) == cudaSuccess && driver_api > 0)
    out.emplace_back("cuda_driver_api", cuda_version(driver_api));
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    out.emplace_back("cuda_runtime", cuda_version(runtime));
  cudaGetLastError();
  out.emplace_back("cublaslt", dotted_version(static_cast<long>(cublasLtGetVersion())));
  int nccl = 0;
  if (ncclGetVersion(&nccl) == ncclSuccess) out.emplace_back("nccl", dotted_version(nccl));
  return out;
}

std::vector<std::vector<std::string>> gpu_link_matrix() {
  const int n = cuda_device_count();
  const Nvml nvml;
  if (n == 0 || !nvml.ok()) return {};
  std::vector<NvmlDevice> devs(static_cast<size_t>(n));
  std::vector<std::string> buses(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    devs[static_cast<size_t>(i)] = nvml.device(i);
    buses[static_cast<size_t>(i)] = bus_id(i);
    if (devs[static_cast<size_t>(i)] == nullptr) return {};
  }
  std::vector<std::vector<std::string>> m(static_cast<size_t>(n),
                                          std::vector<std::string>(static_cast<size_t>(n)));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      std::string& cell = m[static_cast<size_t>(i)][static_cast<size_t>(j)];
      if (i == j) {
        cell = "X";
        continue;
      }
      NvmlDevice a = devs[static_cast<size_t>(i)], b = devs[static_cast<size_t>(j)];
      int links = nvml.direct_links(a, buses[static_cast<size_t>(j)]);
      // Through an NVSwitch the far end of every link is the switch: all of a GPU's links
      // reach every peer on the fabric, which is what nvidia-smi reports as NV<n>.
      if (links == 0 && nvml.nvlink_p2p(a, b)) {
        const int la = nvml.active_links(a), lb = nvml.active_links(b);
        links = la < lb ? la : lb;
      }
      cell = links > 0 ? "NV" + std::to_string(links) : nvml.pcie_path(a, b);
    }
  }
  return m;
}

// The sampling thread owns its NVML session; the main thread only reads the clock and, at the
// end, the samples.
struct GpuSampler::Impl {
  using Clock = std::chrono::steady_clock;
  Clock::time_point start = Clock::now();
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::vector<GpuSample> samples;
  std::thread thread;

  int64_t since_start() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  }

  void run(int device, int period_ms) {
    const Nvml nvml;
    const NvmlDevice dev = nvml.device(device);
    if (dev == nullptr) return;
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      lock.unlock();
      GpuSample s;
      s.t_ns = since_start();
      s.sm_clock_mhz = nvml.clock(dev, kNvmlClockSm);
      s.mem_clock_mhz = nvml.clock(dev, kNvmlClockMem);
      s.power_w = nvml.power_instant_w(dev);
      s.power_avg_w = nvml.power_avg_w(dev);
      s.temp_c = nvml.temperature_c(dev);
      s.clock_event_reasons = nvml.clock_event_reasons(dev);
      lock.lock();
      samples.push_back(s);
      wake.wait_for(lock, std::chrono::milliseconds(period_ms), [this] { return stopping; });
    }
  }
};

GpuSampler::GpuSampler(int device, int period_ms) : m_impl(std::make_unique<Impl>()) {
  m_impl->thread = std::thread([impl = m_impl.get(), device, period_ms] {
    // The CUDA runtime is not touched here beyond the PCI bus id that finds the NVML handle.
    impl->run(device, period_ms);
  });
}

GpuSampler::~GpuSampler() {
  stop();
}

int64_t GpuSampler::now_ns() const {
  return m_impl->since_start();
}

std::vector<GpuSample> GpuSampler::stop() {
  {
    std::lock_guard<std::mutex> lock(m_impl->mutex);
    m_impl->stopping = true;
  }
  m_impl->wake.notify_all();
  if (m_impl->thread.joinable()) m_impl->thread.join();
  return std::move(m_impl->samples);
}

} // namespace ridgeline
