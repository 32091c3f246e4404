// The two file layouts (see file_layout.hpp). Rank 0 writes everything that is not per rank
// (summaries, topology, roofs, tables: O(ranks) at most); the per-rank rows never meet on one
// rank: each rank writes its own (single), or its node's first rank writes the node's, one rank
// at a time (per-node).
#include "app/file_layout.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>

#include "app/h5.hpp"
#include "app/protocol.hpp"
#include "app/run_file.hpp"
#include "app/run_file_write.hpp"
#include "core/error.hpp"
#include "core/files.hpp"
#include "core/mpi_session.hpp"

namespace ridgeline {
namespace {

constexpr int kRowsTag = 7301;
// Samples tables longer than this are chunked and compressed, as the serial writer does.
constexpr size_t kCompressRows = 4096;
const char* const kLayoutNames[] = {"single", "per-node"};

int rank_of(MPI_Comm comm) {
  int rank = 0;
  RIDGELINE_CHECK(MPI_Comm_rank(comm, &rank));
  return rank;
}

int size_of(MPI_Comm comm) {
  int size = 0;
  RIDGELINE_CHECK(MPI_Comm_size(comm, &size));
  return size;
}

// Runs `fn`; its exception's message, or "" when it succeeded.
template <class Fn> std::string attempt(Fn&& fn) {
  try {
    fn();
    return "";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    return what.empty() ? "failed" : what;
  }
}

// Every rank calls: the lowest failing rank's message, or "" when no rank failed.
std::string first_error(MPI_Comm comm, const std::string& error) {
  const int size = size_of(comm);
  int first = error.empty() ? size : rank_of(comm);
  RIDGELINE_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm));
  return first == size ? "" : broadcast_string(comm, error, first);
}

// Every rank calls: throws the lowest failing rank's message on every rank.
void agree(MPI_Comm comm, const std::string& path, const std::string& error) {
  const std::string first = first_error(comm, error);
  if (!first.empty()) throw Error(first.rfind(path, 0) == 0 ? first : path + ": " + first);
}

// A communicator freed when it goes out of scope.
struct OwnedComm {
  MPI_Comm comm = MPI_COMM_NULL;
  ~OwnedComm() {
    if (comm != MPI_COMM_NULL) RIDGELINE_CHECK_NOTHROW(MPI_Comm_free(&comm));
  }
};

std::string rank_group(const std::string& prefix, int64_t rank) {
  return prefix + "/ranks/" + std::to_string(rank);
}

// The group at absolute `path` in `file`, with the groups on the way created where missing.
h5::Handle ensure_group(hid_t file, const std::string& path) {
  size_t start = 1;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string walked = path.substr(0, end);
    if (!h5::exists(file, walked)) h5::create_group(file, walked);
    start = end + 1;
  }
  return h5::open_group(file, path);
}

// A fresh identifier of one write of a file set: node files carry their master's.
std::string new_file_set_id() {
  std::random_device device;
  const uint64_t id =
      (static_cast<uint64_t>(device()) << 32) ^ device() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(id));
  return text;
}

// Per rank, in rank order: the rows of each group, then the samples.
struct RowCounts {
  size_t per_rank = 0;
  std::vector<int64_t> values;
  int64_t timeline(int64_t rank, size_t group) const {
    return values[static_cast<size_t>(rank) * per_rank + group];
  }
  int64_t samples(int64_t rank) const {
    return values[static_cast<size_t>(rank) * per_rank + per_rank - 1];
  }
};

// What the ranks' rows take in the file, with room for each dataset's header and the metadata.
size_t rows_bytes(const RowCounts& counts, int64_t ranks) {
  size_t bytes = size_t{256} << 10;
  for (int64_t r = 0; r < ranks; ++r) {
    for (size_t g = 0; g + 1 < counts.per_rank; ++g)
      bytes += static_cast<size_t>(counts.timeline(r, g)) * sizeof(TimelineRecord) + 4096;
    bytes += static_cast<size_t>(counts.samples(r)) * sizeof(GpuSample) + 4096;
  }
  return bytes;
}

// The per-rank part of the file rank 0 writes: a group per rank with the attribute `rows`; in
// the per-node layout also the external links to the rank's node file (`node_file` per rank).
RanksPart skeleton(const RankRows& mine, const RowCounts& counts, int64_t ranks,
                   const std::vector<std::string>* node_file) {
  RanksPart part;
  auto index_of = [&mine](const std::string& prefix) {
    return static_cast<size_t>(std::find(mine.groups.begin(), mine.groups.end(), prefix) -
                               mine.groups.begin());
  };
  part.has = [&mine, index_of](const std::string& prefix) {
    return index_of(prefix) < mine.groups.size();
  };
  part.write = [&mine, &counts, ranks, node_file, index_of](hid_t parent,
                                                            const std::string& prefix) {
    const size_t g = index_of(prefix);
    h5::Handle all = h5::create_group(parent, "ranks");
    for (int64_t r = 0; r < ranks; ++r) {
      h5::Handle group = h5::create_group(all.id(), std::to_string(r));
      h5::write_attr(group.id(), "rows", counts.timeline(r, g));
      if (node_file == nullptr) continue;
      const std::string& file = (*node_file)[static_cast<size_t>(r)];
      h5::create_external_link(group.id(), "timeline", file, rank_group(prefix, r) + "/timeline");
      if (g == 0 && counts.samples(r) > 0)
        h5::create_external_link(group.id(), "samples", file, rank_group(prefix, r) + "/samples");
    }
  };
  return part;
}

// Rank 0 closes the file set: write_seconds on the (temporary) file, then the rename onto `path`.
void finish(TemporaryFile& temporary, const std::string& path, double seconds) {
  h5::Handle file = h5::open_memory_file(temporary.path());
  h5::write_attr(file.id(), "write_seconds", seconds);
  h5::save_memory_file(file, temporary.path());
  temporary.rename_to(path);
}

FilesWritten write_single(MPI_Comm comm, const std::string& path, const RunData& data,
                          const RankRows& mine, const RowCounts& counts, double started) {
  const int rank = rank_of(comm);
  const int64_t ranks = size_of(comm);
  std::unique_ptr<TemporaryFile> temporary;
  if (rank == 0) temporary = std::make_unique<TemporaryFile>(temporary_name(path));
  const std::string tmp = broadcast_string(comm, temporary ? temporary->path() : "", 0);
  std::string error;
  if (rank == 0)
    error = attempt([&] {
      write_run_contents(tmp, data, skeleton(mine, counts, ranks, nullptr),
                         {{"file_layout", std::string(kLayoutNames[0])}});
      // The rows' space, reserved before the ranks write them: a filesystem that fills up
      // halfway through would leave HDF5 a file it cannot close.
      reserve_file_space(tmp, std::filesystem::file_size(tmp) + rows_bytes(counts, ranks));
    });
  agree(comm, path, error);

  // Every rank creates every rank's datasets (collective metadata) and writes its own rows
  // (independent I/O into contiguous datasets).
  {
    h5::Handle file = h5::open_file_parallel(tmp, comm);
    const Table samples_like = samples_table({});
    for (size_t g = 0; g < mine.groups.size(); ++g)
      for (int64_t r = 0; r < ranks; ++r) {
        h5::Handle group = h5::open_group(file.id(), rank_group(mine.groups[g], r));
        h5::Handle timeline = h5::create_timeline(
            group.id(), "timeline", static_cast<size_t>(counts.timeline(r, g)), false);
        if (r == rank && error.empty())
          error = attempt([&] { h5::write_timeline_rows(timeline.id(), *mine.timelines[g]); });
        if (g != 0 || counts.samples(r) == 0) continue;
        h5::Handle samples = h5::create_table(group.id(), "samples", samples_like,
                                              static_cast<size_t>(counts.samples(r)), false);
        h5::write_attr(samples.id(), "period_ms", mine.sample_period_ms);
        if (r == rank && error.empty())
          error = attempt([&] { h5::write_table_rows(samples.id(), samples_table(mine.samples)); });
      }
    file.close();
  }
  agree(comm, path, error);
  double seconds = MPI_Wtime() - started;
  if (rank == 0) error = attempt([&] { finish(*temporary, path, seconds); });
  agree(comm, path, error);
  RIDGELINE_CHECK(MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, comm));
  return {seconds, 0};
}

// The node file a rank's rows go to: the ranks sharing it (a node's, shared memory, cut into
// runs of ranks_per_file), numbered in the order of their first ranks (rank 0 writes node file
// 0). Every rank of `comm` constructs one.
struct NodeFile {
  OwnedComm comm; ///< the ranks sharing the file; its rank 0 (the leader) writes it
  int rank = 0, size = 0;
  bool leader = false;
  int64_t index = 0, files = 0; ///< this node file, node files
  std::vector<int64_t> file_of; ///< rank 0: each rank's node file
  std::vector<int> members;     ///< the leader: each member's rank in `comm`, in node order

  NodeFile(MPI_Comm world, int ranks_per_file) {
    const int world_rank = rank_of(world);
    {
      OwnedComm shared;
      RIDGELINE_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL,
                                          &shared.comm));
      const int local = rank_of(shared.comm);
      RIDGELINE_CHECK(MPI_Comm_split(shared.comm, ranks_per_file > 0 ? local / ranks_per_file : 0,
                                     local, &comm.comm));
    }
    rank = rank_of(comm.comm), size = size_of(comm.comm);
    leader = rank == 0;
    int64_t numbering[2] = {0, 0}; // this node file, node files
    {
      OwnedComm leaders;
      RIDGELINE_CHECK(MPI_Comm_split(world, leader ? 0 : MPI_UNDEFINED, world_rank, &leaders.comm));
      if (leader) numbering[0] = rank_of(leaders.comm), numbering[1] = size_of(leaders.comm);
    }
    RIDGELINE_CHECK(MPI_Bcast(numbering, 2, MPI_INT64_T, 0, comm.comm));
    index = numbering[0], files = numbering[1];
    file_of.resize(world_rank == 0 ? static_cast<size_t>(size_of(world)) : 0);
    RIDGELINE_CHECK(
        MPI_Gather(&numbering[0], 1, MPI_INT64_T, file_of.data(), 1, MPI_INT64_T, 0, world));
    members.resize(leader ? static_cast<size_t>(size) : 0);
    RIDGELINE_CHECK(MPI_Gather(&world_rank, 1, MPI_INT, members.data(), 1, MPI_INT, 0, comm.comm));
  }
};

// The leader writes its node file (`part`) at `tmp`: who it is, then its members' rows one rank
// at a time, as they arrive. Returns the first failure ("" none).
std::string write_node_file(const NodeFile& node, const std::string& part, const std::string& tmp,
                            const std::string& master_name, const std::string& file_set,
                            const RankRows& mine) {
  h5::Handle file;
  std::string error = attempt([&] {
    file = h5::create_memory_file(tmp);
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    h5::write_attrs(file.id(), {{"schema_version", kSchemaVersion},
                                {"part_of", master_name},
                                {"file_set", file_set},
                                {"node_file", node.index},
                                {"node_files", node.files},
                                {"host", std::string(host)}});
    h5::write_dataset(file.id(), "node_ranks",
                      std::vector<int64_t>(node.members.begin(), node.members.end()));
  });
  for (int i = 0; i < node.size; ++i) {
    const int64_t world_rank = node.members[static_cast<size_t>(i)];
    // A failed write still receives every member's rows: the senders must not wait forever.
    for (size_t g = 0; g < mine.groups.size(); ++g) {
      std::vector<TimelineRecord> received;
      if (i > 0) received = recv_rows<TimelineRecord>(node.comm.comm, i, kRowsTag);
      const std::vector<TimelineRecord>& rows = i > 0 ? received : *mine.timelines[g];
      if (error.empty())
        error = attempt([&] {
          h5::write_timeline(ensure_group(file.id(), rank_group(mine.groups[g], world_rank)).id(),
                             "timeline", rows);
        });
    }
    std::vector<GpuSample> received;
    if (i > 0) received = recv_rows<GpuSample>(node.comm.comm, i, kRowsTag);
    const std::vector<GpuSample>& samples = i > 0 ? received : mine.samples;
    if (error.empty() && !samples.empty() && !mine.groups.empty())
      error = attempt([&] {
        h5::Handle group = ensure_group(file.id(), rank_group(mine.groups.front(), world_rank));
        h5::write_table(group.id(), "samples", samples_table(samples),
                        samples.size() > kCompressRows);
        h5::Handle dataset(H5Dopen2(group.id(), "samples", H5P_DEFAULT), "H5Dopen2",
                           part + ":samples");
        h5::write_attr(dataset.id(), "period_ms", mine.sample_period_ms);
      });
  }
  if (error.empty()) error = attempt([&] { h5::save_memory_file(file, tmp); });
  return error;
}

// Rank 0: the master file that links every rank's rows in its node file. Returns the seconds
// from `started` to its last object.
double write_master_file(const std::string& path, const RunData& data, const RankRows& mine,
                         const RowCounts& counts, int64_t ranks, const NodeFile& node,
                         const std::string& file_set, double started) {
  TemporaryFile master(temporary_name(path));
  std::vector<std::string> node_file;
  for (int64_t f : node.file_of)
    node_file.push_back(std::filesystem::path(node_file_path(path, f)).filename().string());
  write_run_contents(master.path(), data, skeleton(mine, counts, ranks, &node_file),
                     {{"file_layout", std::string(kLayoutNames[1])},
                      {"node_files", node.files},
                      {"file_set", file_set}});
  const double seconds = MPI_Wtime() - started;
  finish(master, path, seconds);
  return seconds;
}

FilesWritten write_per_node(MPI_Comm comm, const std::string& path, const RunData& data,
                            const RankRows& mine, const RowCounts& counts, int ranks_per_file,
                            double started) {
  const int rank = rank_of(comm);
  const int64_t ranks = size_of(comm);
  const NodeFile node(comm, ranks_per_file);
  const std::string file_set = broadcast_string(comm, rank == 0 ? new_file_set_id() : "", 0);
  const std::string part = node_file_path(path, node.index);
  const std::string master_name = std::filesystem::path(path).filename().string();

  // Node files: the first rank writes its members' rows one rank at a time, as they arrive.
  std::unique_ptr<TemporaryFile> part_tmp;
  std::string error;
  if (node.leader) {
    part_tmp = std::make_unique<TemporaryFile>(temporary_name(part));
    error = write_node_file(node, part, part_tmp->path(), master_name, file_set, mine);
  } else {
    for (const std::vector<TimelineRecord>* rows : mine.timelines)
      send_rows(node.comm.comm, 0, kRowsTag, *rows);
    send_rows(node.comm.comm, 0, kRowsTag, mine.samples);
  }
  agree(comm, path, error); // a failed node file's temporary is removed on the way out

  // Every node file complete: rename them, then write the master file that links them.
  bool renamed = false;
  auto remove_part = [&] {
    if (renamed) std::remove(part.c_str());
  };
  if (node.leader) {
    error = attempt([&] { part_tmp->rename_to(part); });
    renamed = error.empty();
  }
  const std::string rename_error = first_error(comm, error);
  if (!rename_error.empty()) {
    remove_part();
    throw Error(path + ": " + rename_error);
  }
  double seconds = 0;
  if (rank == 0)
    error = attempt([&] {
      seconds = write_master_file(path, data, mine, counts, ranks, node, file_set, started);
    });
  const std::string master_error = first_error(comm, error);
  if (!master_error.empty()) {
    remove_part();
    throw Error(master_error.rfind(path, 0) == 0 ? master_error : path + ": " + master_error);
  }
  RIDGELINE_CHECK(MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, comm));
  return {seconds, node.files};
}

} // namespace

FileLayout parse_file_layout(const std::string& name) {
  if (name == kLayoutNames[0]) return FileLayout::single;
  if (name == kLayoutNames[1]) return FileLayout::per_node;
  throw UsageError("file layout must be single or per-node (got '" + name + "')");
}

const char* file_layout_name(FileLayout layout) {
  return kLayoutNames[static_cast<int>(layout)];
}

FileLayout default_file_layout() {
  return h5::parallel_library() ? FileLayout::single : FileLayout::per_node;
}

std::string node_file_path(const std::string& path, int64_t index) {
  const std::string suffix = ".h5";
  const bool h5 = path.size() > suffix.size() &&
                  path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  return (h5 ? path.substr(0, path.size() - suffix.size()) : path) + ".node" +
         std::to_string(index) + ".h5";
}

FilesWritten write_run_files(MPI_Comm comm, const std::string& path, const RunData& data,
                             const RankRows& mine, const FileWriteOptions& options) {
  const int rank = rank_of(comm);
  const int ranks = size_of(comm);
  if (mine.groups.size() != mine.timelines.size())
    throw Error(path + ": " + std::to_string(mine.groups.size()) + " timeline groups but " +
                std::to_string(mine.timelines.size()) + " timelines");
  RowCounts counts;
  counts.per_rank = mine.groups.size() + 1;
  std::vector<int64_t> own;
  for (const std::vector<TimelineRecord>* rows : mine.timelines)
    own.push_back(static_cast<int64_t>(rows->size()));
  own.push_back(static_cast<int64_t>(mine.samples.size()));
  counts.values.resize(counts.per_rank * static_cast<size_t>(ranks));
  RIDGELINE_CHECK(MPI_Allgather(own.data(), static_cast<int>(counts.per_rank), MPI_INT64_T,
                                counts.values.data(), static_cast<int>(counts.per_rank),
                                MPI_INT64_T, comm));
  agree(comm, path,
        rank == 0 ? attempt([&] { check_run_data(path, data, static_cast<size_t>(ranks)); }) : "");
  if (options.layout == FileLayout::single && !h5::parallel_library())
    throw UsageError(
        "--file-layout single needs HDF5 with MPI-IO (parallel HDF5); this build links the "
        "serial library: use --file-layout per-node");
  RIDGELINE_CHECK(MPI_Barrier(comm));
  const double started = MPI_Wtime();
  // Nothing per rank (a sweep that keeps no timelines): one file, written by rank 0.
  if (mine.groups.empty() || options.layout == FileLayout::single) {
    if (!mine.groups.empty()) return write_single(comm, path, data, mine, counts, started);
    std::string error;
    double seconds = 0;
    if (rank == 0)
      error = attempt([&] {
        TemporaryFile temporary(temporary_name(path));
        write_run_contents(temporary.path(), data, skeleton(mine, counts, ranks, nullptr),
                           {{"file_layout", std::string(kLayoutNames[0])}});
        seconds = MPI_Wtime() - started;
        finish(temporary, path, seconds);
      });
    agree(comm, path, error);
    RIDGELINE_CHECK(MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, comm));
    return {seconds, 0};
  }
  return write_per_node(comm, path, data, mine, counts, options.ranks_per_file, started);
}

} // namespace ridgeline
