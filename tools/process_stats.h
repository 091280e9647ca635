// What this process reads of itself in /proc: its resident set, how often
// its threads slept and woke, and what it wrote to the device. For the
// stress tool, the benchmarks and the tests that bound memory and idle
// wake-ups. Linux only.
#ifndef WALBUS_TOOLS_PROCESS_STATS_H_
#define WALBUS_TOOLS_PROCESS_STATS_H_

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace walbus::tools {

// The resident set, in MiB.
inline double ResidentMiB() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size_pages = 0, resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return static_cast<double>(resident_pages) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

// The anonymous part of the resident set (heap, stacks: what only this
// process holds), in MiB. The rest is mapped files, mostly the shared
// libraries' code: shared with other processes, and dropped by the kernel
// under memory pressure as it can be read back.
inline double AnonymousResidentMiB() {
  std::ifstream status("/proc/self/status");
  constexpr std::string_view kField = "RssAnon:";
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(kField, 0) == 0) return std::stod(line.substr(kField.size())) / 1024.0;  // in kB
  }
  return 0;
}

// What the C allocator holds, in MiB: in use by the program, and free
// (held for reuse rather than given back). Together with the anonymous
// resident set they tell a growing program from a fragmenting heap. Both
// 0 where the C library is not glibc.
struct MallocHeap {
  double in_use_mib = 0;
  double free_mib = 0;
};
inline MallocHeap MallocHeapMiB() {
  MallocHeap heap;
#if defined(__GLIBC__)
  const struct mallinfo2 info = ::mallinfo2();  // every arena
  heap.in_use_mib = static_cast<double>(info.uordblks + info.hblkhd) / (1024.0 * 1024.0);
  heap.free_mib = static_cast<double>(info.fordblks) / (1024.0 * 1024.0);
#endif
  return heap;
}

// Voluntary context switches of the bus's threads (walbus's, named
// walbus-*, and RocksDB's, rocksdb:*), summed: each is a sleep that ended
// in a wake-up, so over an idle period they count the wake-ups. Other
// threads (the caller's, a sanitizer runtime's) are not the bus's. A
// thread that ended meanwhile no longer counts: compare readings taken
// while the same threads live.
inline uint64_t BusThreadsWakeups() {
  uint64_t total = 0;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/task", ec), end; !ec && it != end; it.increment(ec)) {
    std::string name;
    std::getline(std::ifstream(it->path() / "comm"), name);
    if (name.rfind("walbus-", 0) != 0 && name.rfind("rocksdb:", 0) != 0) continue;
    std::ifstream status(it->path() / "status");
    for (std::string line; std::getline(status, line);) {
      constexpr std::string_view kField = "voluntary_ctxt_switches:";
      if (line.rfind(kField, 0) == 0) total += std::stoull(line.substr(kField.size()));
    }
  }
  return total;
}

// Bytes this process had written to the device (write_bytes: the WAL,
// table files from flushes and compactions, the MANIFEST), less those it
// wrote to files deleted before they reached it (cancelled_write_bytes).
inline uint64_t DeviceBytesWritten() {
  std::ifstream io("/proc/self/io");
  uint64_t written = 0, cancelled = 0;
  for (std::string field; io >> field;) {
    uint64_t value = 0;
    io >> value;
    if (field == "write_bytes:") written = value;
    if (field == "cancelled_write_bytes:") cancelled = value;
  }
  return written - std::min(written, cancelled);
}

// The sum of the sizes of the files under `dir`: what a database
// directory takes (table files, the write-ahead log, the MANIFEST,
// compaction's outputs while they are written). RocksDB adds and removes
// files meanwhile; a file that vanishes during the walk is not counted.
inline uint64_t DirectoryBytes(const std::string& dir) {
  std::error_code ec;
  uint64_t bytes = 0;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;
    const uintmax_t size = it->file_size(file_ec);
    if (!file_ec) bytes += size;
  }
  return bytes;
}

}  // namespace walbus::tools

#endif  // WALBUS_TOOLS_PROCESS_STATS_H_
