// The progress board and line (see progress.hpp).
#include "core/progress.hpp"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <new>
#include <thread>

#include "core/error.hpp"
#include "core/mpi_session.hpp"

namespace ridgeline {
namespace progress {
namespace {

// Heartbeat period of the monitor thread, and the age past which a rank counts as not running
// (stopped, or its whole process hung): many periods, so that a loaded host never trips it.
constexpr int kHeartbeatMs = 1000;
constexpr int64_t kStaleNs = 5'000'000'000;
// The progress line's period: a terminal line is rewritten in place, a log gets plain lines.
constexpr double kTerminalLineS = 2.0;
constexpr double kPlainLineS = 5.0;
constexpr size_t kTextBytes = 160;
constexpr size_t kMaxNamed = 8;

int64_t monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t); // one clock for every process of a host
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// One rank's entry on the node's shared window: written by its own process only.
struct alignas(64) Slot {
  std::atomic<int64_t> heartbeat_ns;
  std::atomic<int64_t> phase_seq;
  std::atomic<int64_t> iteration;
  std::atomic<int32_t> world_rank;
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> text_seq; // odd while the text is being written (a seqlock)
  std::atomic<char> text[kTextBytes];
};
static_assert(std::atomic<int64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the board needs address-free atomics");

struct Snapshot {
  int rank = -1;
  int pid = 0;
  int64_t heartbeat_ns = 0, phase_seq = 0, iteration = -1;
  std::string text;
};

Snapshot read_slot(const Slot& s) {
  Snapshot out;
  out.rank = s.world_rank.load(std::memory_order_relaxed);
  out.pid = s.pid.load(std::memory_order_relaxed);
  out.heartbeat_ns = s.heartbeat_ns.load(std::memory_order_relaxed);
  out.phase_seq = s.phase_seq.load(std::memory_order_acquire);
  out.iteration = s.iteration.load(std::memory_order_relaxed);
  // A writer that stopped mid-update leaves the sequence odd forever: a bounded number of tries.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint32_t before = s.text_seq.load(std::memory_order_acquire);
    std::string text;
    for (size_t i = 0; i < kTextBytes; ++i) {
      const char c = s.text[i].load(std::memory_order_relaxed);
      if (c == '\0') break;
      text += c;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (before % 2 == 0 && s.text_seq.load(std::memory_order_relaxed) == before) {
      out.text = text;
      return out;
    }
    out.text = text + " (being updated)";
  }
  return out;
}

// This process's own state (exists without a board, e.g. in unit tests).
struct Local {
  std::atomic<int64_t> phase_seq{0};
  std::atomic<int64_t> iteration{-1};
  std::mutex mutex;
  std::mutex printing; // orders the line's prints (a periodic one never follows the final one)
  std::string phase;
  Slot* slot = nullptr; // on the board, once there is one
  const Board* board = nullptr;
  // The line (rank 0): guarded by `mutex` except the counters.
  bool line = false;
  std::string command;
  std::chrono::steady_clock::time_point started, planned, last_print;
  bool printed = false;
  int64_t point = 0, points = 0;
  std::string point_label;
  std::chrono::steady_clock::time_point points_started; // the first point's start
  int64_t total = 0;                                    // iterations of the planned measurement
  int64_t loop_base = 0, loop_size = 0;                 // main thread only
  std::atomic<int64_t> done{0}; // iterations of the planned measurement done
};

Local& local() {
  static Local* l = new Local(); // never destroyed: the watchdog thread may read it at exit
  return *l;
}

bool terminal() {
  return isatty(fileno(stderr)) != 0;
}

std::string where(const std::string& text, int64_t iteration) {
  std::string w = text.empty() ? "(starting up)" : text;
  if (iteration >= 0) w += ", iteration " + std::to_string(iteration);
  return w;
}

std::string seconds_text(double s) {
  char buf[32];
  const long long whole = std::llround(s);
  if (whole < 90)
    std::snprintf(buf, sizeof(buf), "%lld s", whole);
  else if (whole < 5400)
    std::snprintf(buf, sizeof(buf), "%lld min %02lld s", whole / 60, whole % 60);
  else
    std::snprintf(buf, sizeof(buf), "%.1f h", s / 3600);
  return buf;
}

// The line's text; `l.mutex` held.
std::string line_text(Local& l, std::chrono::steady_clock::time_point now) {
  using seconds = std::chrono::duration<double>;
  const double elapsed = seconds(now - l.started).count();
  std::string text = l.command + ": ";
  const int64_t done = std::min(l.done.load(std::memory_order_relaxed), l.total);
  double fraction = -1; // of the current measurement
  if (l.total > 0 && done > 0) fraction = static_cast<double>(done) / static_cast<double>(l.total);
  double eta = -1;
  if (l.points > 0) {
    text += "point " + std::to_string(l.point) + " of " + std::to_string(l.points);
    if (!l.point_label.empty()) text += " (" + l.point_label + ")";
    text += ", ";
    const double finished = static_cast<double>(l.point - 1) + std::max(0.0, fraction);
    const double sweeping = seconds(now - l.points_started).count();
    if (finished > 0) eta = sweeping / finished * (static_cast<double>(l.points) - finished);
  } else if (fraction > 0) {
    const double measuring = seconds(now - l.planned).count();
    eta = measuring / fraction * (1 - fraction);
  }
  if (l.total > 0 && done > 0)
    text +=
        std::to_string(done) + " of " + std::to_string(l.total) + " iterations (" + l.phase + ")";
  else
    text += l.phase.empty() ? "starting" : l.phase;
  text += "; elapsed " + seconds_text(elapsed);
  if (eta >= 0) text += ", ETA " + seconds_text(eta);
  return text;
}

void emit(const std::string& text, bool final_line) {
  if (terminal())
    std::fprintf(stderr, "\r%s\033[K%s", text.c_str(), final_line ? "\n" : "");
  else
    std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
}

// Printed outside the lock: a stderr that blocks (a full pipe) must never hold up set_phase().
void maybe_print_line() {
  Local& l = local();
  std::lock_guard<std::mutex> printing(l.printing);
  std::string text;
  {
    std::lock_guard<std::mutex> lock(l.mutex);
    if (!l.line) return;
    const auto now = std::chrono::steady_clock::now();
    const double period = terminal() ? kTerminalLineS : kPlainLineS;
    const auto since = l.printed ? l.last_print : l.started;
    if (std::chrono::duration<double>(now - since).count() < period) return;
    text = line_text(l, now);
    l.printed = true;
    l.last_print = now;
  }
  emit(text, false);
}

// Ranks as "1, 2, 5-7".
std::string rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]) +
           (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return out;
}

} // namespace

struct Board::Shared {
  Slot* slots = nullptr;
  int local_rank = 0, local_size = 1, rank = 0;
  std::vector<std::string> hosts; // of every world rank
  std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;
  std::thread monitor;
};

void set_phase(const std::string& what) {
  Local& l = local();
  {
    std::lock_guard<std::mutex> lock(l.mutex);
    l.phase = what;
  }
  l.iteration.store(-1, std::memory_order_relaxed);
  const int64_t seq = l.phase_seq.load(std::memory_order_relaxed) + 1;
  l.phase_seq.store(seq, std::memory_order_relaxed);
  if (Slot* s = l.slot) {
    s->text_seq.fetch_add(1, std::memory_order_acq_rel);
    for (size_t i = 0; i < kTextBytes; ++i)
      s->text[i].store(i + 1 < kTextBytes && i < what.size() ? what[i] : '\0',
                       std::memory_order_relaxed);
    s->text_seq.fetch_add(1, std::memory_order_release);
    s->iteration.store(-1, std::memory_order_relaxed);
    s->phase_seq.store(seq, std::memory_order_release);
  }
}

std::string phase() {
  Local& l = local();
  std::lock_guard<std::mutex> lock(l.mutex);
  return l.phase;
}

void set_iteration(int64_t k) {
  Local& l = local();
  l.iteration.store(k, std::memory_order_relaxed);
  l.done.store(l.loop_base + k + 1, std::memory_order_relaxed);
  if (Slot* s = l.slot) s->iteration.store(k, std::memory_order_relaxed);
}

std::pair<int64_t, int64_t> position() {
  const Local& l = local();
  return {l.phase_seq.load(std::memory_order_relaxed), l.iteration.load(std::memory_order_relaxed)};
}

void enable_line(const std::string& command) {
  Local& l = local();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.line = true;
  l.command = command;
  l.started = std::chrono::steady_clock::now();
  l.printed = false;
}

void set_point(int64_t k, int64_t n, const std::string& label) {
  Local& l = local();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (l.points == 0) l.points_started = std::chrono::steady_clock::now();
  l.point = k;
  l.points = n;
  l.point_label = label;
  l.total = 0;
  l.done.store(0, std::memory_order_relaxed);
}

void plan(int64_t iterations) {
  Local& l = local();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.total = iterations;
  l.planned = std::chrono::steady_clock::now();
  l.loop_base = 0;
  l.loop_size = 0;
  l.done.store(0, std::memory_order_relaxed);
}

void begin_loop(int64_t iterations) {
  Local& l = local();
  l.loop_base += l.loop_size;
  l.loop_size = iterations;
  l.done.store(l.loop_base, std::memory_order_relaxed);
}

void finish_line(const std::string& note) {
  Local& l = local();
  std::lock_guard<std::mutex> printing(l.printing);
  std::string text;
  {
    std::lock_guard<std::mutex> lock(l.mutex);
    if (!l.line) return;
    l.line = false;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - l.started).count();
    const std::string point =
        l.points > 0 ? "point " + std::to_string(l.point) + " of " + std::to_string(l.points) + ", "
                     : "";
    text = l.command + ": " + point + "done in " + seconds_text(elapsed) +
           (note.empty() ? "" : " (" + note + ")");
  }
  emit(text, true);
}

Board::Board(MPI_Comm world, int rank, const std::string& hostname) : m_shared(new Shared) {
  Shared& s = *m_shared;
  s.rank = rank;
  s.hosts = allgather_strings(world, hostname);
  RIDGELINE_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &m_node));
  RIDGELINE_CHECK(MPI_Comm_rank(m_node, &s.local_rank));
  RIDGELINE_CHECK(MPI_Comm_size(m_node, &s.local_size));
  // One contiguous array on the node's first rank; every rank writes its own slot.
  void* mine = nullptr;
  const MPI_Aint bytes = s.local_rank == 0 ? static_cast<MPI_Aint>(sizeof(Slot)) * s.local_size : 0;
  RIDGELINE_CHECK(MPI_Win_allocate_shared(bytes, static_cast<int>(sizeof(Slot)), MPI_INFO_NULL,
                                          m_node, &mine, &m_win));
  MPI_Aint size = 0;
  int unit = 0;
  void* base = nullptr;
  RIDGELINE_CHECK(MPI_Win_shared_query(m_win, 0, &size, &unit, &base));
  s.slots = static_cast<Slot*>(base);
  Slot* slot = new (&s.slots[s.local_rank]) Slot;
  slot->heartbeat_ns.store(monotonic_ns(), std::memory_order_relaxed);
  slot->phase_seq.store(0, std::memory_order_relaxed);
  slot->iteration.store(-1, std::memory_order_relaxed);
  slot->world_rank.store(rank, std::memory_order_relaxed);
  slot->pid.store(static_cast<int32_t>(getpid()), std::memory_order_relaxed);
  slot->text_seq.store(0, std::memory_order_relaxed);
  for (std::atomic<char>& c : slot->text)
    c.store('\0', std::memory_order_relaxed);
  RIDGELINE_CHECK(MPI_Barrier(m_node)); // every slot initialised before anyone reads one
  Local& l = local();
  l.slot = slot;
  l.board = this;
  s.monitor = std::thread([this, slot] {
    Shared& sh = *m_shared;
    std::unique_lock<std::mutex> lock(sh.mutex);
    while (!sh.stop) {
      slot->heartbeat_ns.store(monotonic_ns(), std::memory_order_relaxed);
      lock.unlock();
      maybe_print_line();
      lock.lock();
      sh.cv.wait_for(lock, std::chrono::milliseconds(kHeartbeatMs), [&] { return sh.stop; });
    }
  });
}

Board::~Board() {
  {
    std::lock_guard<std::mutex> lock(m_shared->mutex);
    m_shared->stop = true;
  }
  m_shared->cv.notify_all();
  m_shared->monitor.join();
  Local& l = local();
  l.slot = nullptr;
  l.board = nullptr;
  RIDGELINE_CHECK_NOTHROW(MPI_Win_free(&m_win));
  RIDGELINE_CHECK_NOTHROW(MPI_Comm_free(&m_node));
  delete m_shared;
}

std::string Board::diagnose(bool* other_host) const {
  const Shared& s = *m_shared;
  const int64_t now = monotonic_ns();
  const Snapshot me = read_slot(s.slots[s.local_rank]);
  const std::string here = where(me.text, me.iteration);
  const auto at = [&](const Snapshot& o) { return std::make_pair(o.phase_seq, o.iteration); };
  std::vector<std::string> named;
  std::vector<int> ahead;
  for (int r = 0; r < s.local_size; ++r) {
    if (r == s.local_rank) continue;
    const Snapshot o = read_slot(s.slots[r]);
    const std::string who =
        "rank " + std::to_string(o.rank) + " (host " + s.hosts[static_cast<size_t>(o.rank)] + ")";
    const bool gone = o.pid > 0 && kill(o.pid, 0) != 0 && errno == ESRCH;
    const double silent_s = static_cast<double>(now - o.heartbeat_ns) / 1e9;
    // Where this rank waits, said relative to where the other one is.
    const bool same_phase = o.phase_seq == me.phase_seq;
    const std::string mine = same_phase && me.iteration >= 0
                                 ? "iteration " + std::to_string(me.iteration) + " of " +
                                       (me.text.empty() ? "(starting up)" : me.text)
                                 : here;
    const std::string verb = at(o) < at(me) ? " did not reach " : " did not get through ";
    const std::string its = same_phase ? (o.iteration >= 0 && o.iteration != me.iteration
                                              ? " at iteration " + std::to_string(o.iteration)
                                              : std::string())
                                       : " in " + where(o.text, o.iteration);
    if (gone)
      named.push_back(who + verb + mine + ": its process is gone (killed or crashed), last seen" +
                      (its.empty() ? " there" : its));
    else if (now - o.heartbeat_ns > kStaleNs)
      named.push_back(who + verb + mine + ": it stopped responding " + seconds_text(silent_s) +
                      " ago (stopped, e.g. by SIGSTOP, or its whole process hung)" + its);
    else if (at(o) < at(me))
      named.push_back(who + verb + mine + ": it is still running," +
                      (its.empty() ? " behind" : its));
    else if (at(me) < at(o))
      ahead.push_back(o.rank);
  }
  std::string text;
  for (size_t i = 0; i < std::min(named.size(), kMaxNamed); ++i)
    text += (text.empty() ? "" : "; ") + named[i];
  if (named.size() > kMaxNamed)
    text += "; and " + std::to_string(named.size() - kMaxNamed) + " more";
  if (!ahead.empty())
    text += std::string(text.empty() ? "" : "; ") + "this rank is the one behind: rank(s) " +
            rank_list(ahead) + " already went past " + here;
  if (other_host != nullptr) *other_host = false;
  if (!text.empty()) return text;
  // Nothing on this host explains the wait: name the ranks of the other hosts.
  const std::string& mine = s.hosts[static_cast<size_t>(s.rank)];
  std::map<std::string, std::vector<int>> elsewhere;
  for (size_t r = 0; r < s.hosts.size(); ++r)
    if (s.hosts[r] != mine) elsewhere[s.hosts[r]].push_back(static_cast<int>(r));
  if (elsewhere.empty())
    return "every rank is running and reached " + here +
           ": no rank is missing (a mismatched collective, or a wedged interconnect)";
  if (other_host != nullptr) *other_host = true;
  text = "every rank of host " + mine + " is running and reached " + here +
         "; the rank not answering is on another host:";
  for (const auto& [host, ranks] : elsewhere)
    text += " " + host + " (rank(s) " + rank_list(ranks) + ")";
  return text;
}

const Board* board() {
  return local().board;
}

} // namespace progress
} // namespace ridgeline
