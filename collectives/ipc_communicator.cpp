// The communicator of `run --allreduce oneshot|push|push-ll|twoshot|auto` and `run --a2a ipc`:
// the custom all-reduce for the sum all-reduces it takes, the all-to-all-v over CUDA IPC for the
// all-to-all-vs whose blocks fit it, the wrapped communicator for everything else.
#include <algorithm>
#include <string>
#include <utility>

#include "collectives/ipc_allreduce.hpp"
#include "core/error.hpp"

namespace ridgeline {
namespace {

class IpcCommunicator final : public Communicator {
public:
  IpcCommunicator(std::unique_ptr<Communicator> inner, std::unique_ptr<IpcAllReduce> ipc,
                  std::function<std::string(size_t)> choose, std::unique_ptr<IpcAllToAll> a2a)
      : m_inner(std::move(inner)), m_ipc(std::move(ipc)), m_choose(std::move(choose)),
        m_a2a(std::move(a2a)) {}

  int rank() const override { return m_inner->rank(); }
  int size() const override { return m_inner->size(); }
  const char* backend() const override { return m_inner->backend(); }
  bool stream_ordered() const override { return true; }

  void all_reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                  Stream stream) override {
    const size_t bytes = count * dtype_size(dtype);
    if (m_ipc && op == ReduceOp::sum && dtype != DType::i32 && bytes <= m_ipc->max_bytes()) {
      const std::string impl = m_choose(bytes);
      if (impl != "nccl") {
        m_ipc->all_reduce(send, recv, count, dtype, parse_ipc_algo(impl), stream);
        return;
      }
    }
    other("an all-reduce the custom one does not take")
        .all_reduce(send, recv, count, dtype, op, stream);
  }
  void all_gather(const void* send, void* recv, size_t send_count, DType dtype,
                  Stream stream) override {
    other("all_gather").all_gather(send, recv, send_count, dtype, stream);
  }
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DType dtype, ReduceOp op,
                      Stream stream) override {
    other("reduce_scatter").reduce_scatter(send, recv, recv_count, dtype, op, stream);
  }
  void all_to_all(const void* send, void* recv, size_t count, DType dtype, Stream stream) override {
    other("all_to_all").all_to_all(send, recv, count, dtype, stream);
  }
  void all_to_all_v(const void* send, const std::vector<size_t>& send_counts,
                    const std::vector<size_t>& send_offsets, void* recv,
                    const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_offsets,
                    DType dtype, Stream stream) override {
    const size_t elt = dtype_size(dtype);
    auto bytes = [elt](std::vector<size_t> v) {
      for (size_t& x : v)
        x *= elt;
      return v;
    };
    const std::vector<size_t> sb = bytes(send_counts), rb = bytes(recv_counts);
    const size_t most = std::max(sb.empty() ? 0 : *std::max_element(sb.begin(), sb.end()),
                                 rb.empty() ? 0 : *std::max_element(rb.begin(), rb.end()));
    // Every rank takes the same path only if every rank's blocks fit: the slots are sized for
    // the largest block any rank can send, so the check below never differs between ranks.
    if (m_a2a && most <= m_a2a->max_block_bytes()) {
      m_a2a->all_to_all_v(send, sb, bytes(send_offsets), recv, rb, bytes(recv_offsets), stream);
      return;
    }
    RIDGELINE_REQUIRE(!m_a2a, "all_to_all_v over CUDA IPC: a block larger than its slot");
    other("all_to_all_v")
        .all_to_all_v(send, send_counts, send_offsets, recv, recv_counts, recv_offsets, dtype,
                      stream);
  }
  void broadcast(const void* send, void* recv, size_t count, DType dtype, int root,
                 Stream stream) override {
    other("broadcast").broadcast(send, recv, count, dtype, root, stream);
  }
  void reduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op, int root,
              Stream stream) override {
    other("reduce").reduce(send, recv, count, dtype, op, root, stream);
  }
  void send(const void* buf, size_t count, DType dtype, int peer, Stream stream) override {
    other("send").send(buf, count, dtype, peer, stream);
  }
  void recv(void* buf, size_t count, DType dtype, int peer, Stream stream) override {
    other("recv").recv(buf, count, dtype, peer, stream);
  }
  void group_start() override { m_inner->group_start(); }
  void group_end() override { m_inner->group_end(); }
  void complete(Stream stream) override { m_inner->complete(stream); }
  std::unique_ptr<SymmetricMemory> symmetric_memory(size_t bytes, std::string& why) override {
    return m_inner->symmetric_memory(bytes, why);
  }

private:
  // The wrapped communicator, for a call it can order on the stream.
  Communicator& other(const char* what) {
    if (!m_inner->stream_ordered())
      throw UsageError(std::string("--allreduce with ranks that share a GPU runs the "
                                   "tensor-parallel group without NCCL: it takes only the custom "
                                   "all-reduces, not ") +
                       what + " (no --sequence-parallel, no nccl in the --allreduce-table)");
    return *m_inner;
  }

  std::unique_ptr<Communicator> m_inner;
  std::unique_ptr<IpcAllReduce> m_ipc;
  std::function<std::string(size_t)> m_choose;
  std::unique_ptr<IpcAllToAll> m_a2a;
};

} // namespace

const std::vector<std::string>& ipc_algo_names() {
  static const std::vector<std::string> names = {"oneshot", "push", "push-ll", "twoshot"};
  return names;
}

const char* ipc_algo_name(IpcAlgo algo) {
  return ipc_algo_names()[static_cast<size_t>(algo)].c_str();
}

IpcAlgo parse_ipc_algo(const std::string& name) {
  const std::vector<std::string>& names = ipc_algo_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<IpcAlgo>(i);
  std::string known;
  for (const std::string& n : names)
    known += (known.empty() ? "" : ", ") + n;
  throw UsageError("unknown custom all-reduce '" + name + "' (expected " + known + ")");
}

std::string choose_all_reduce(const std::vector<AllReduceTiming>& table, size_t bytes) {
  if (table.empty()) throw UsageError("an all-reduce table without rows");
  // The smallest measured size that holds the message, else the largest measured.
  size_t at = 0;
  for (const AllReduceTiming& t : table)
    if (t.bytes >= bytes && (at == 0 || t.bytes < at)) at = t.bytes;
  if (at == 0)
    for (const AllReduceTiming& t : table)
      at = std::max(at, t.bytes);
  const AllReduceTiming* best = nullptr;
  for (const AllReduceTiming& t : table)
    if (t.bytes == at && (best == nullptr || t.p50_ns < best->p50_ns)) best = &t;
  return best->impl;
}

std::unique_ptr<Communicator> make_ipc_communicator(std::unique_ptr<Communicator> inner,
                                                    std::unique_ptr<IpcAllReduce> ipc,
                                                    std::function<std::string(size_t bytes)> choose,
                                                    std::unique_ptr<IpcAllToAll> a2a) {
  return std::make_unique<IpcCommunicator>(std::move(inner), std::move(ipc), std::move(choose),
                                           std::move(a2a));
}

} // namespace ridgeline
