// How Options::memory_budget is shared out among what grows with load.
//
// Shares of a budget B: RocksDB B/2 (its block cache, with the memtables
// charged to it: up to 3/8 B); the tail cache B/4 (and an event per 256
// bytes of it); each subscriber's in-flight window an event per 4 KiB of
// B; a commit group B/32. The rest is left for what does not grow: code,
// thread stacks, the allocator. A field the application set lower than
// its share keeps its own value.
//
// Threading: pure functions.
#ifndef WALBUS_BUS_API_MEMORY_BUDGET_H_
#define WALBUS_BUS_API_MEMORY_BUDGET_H_

#include <cstddef>

#include "walbus/options.h"

namespace walbus::internal {

// `options` with each memory bound lowered to its share of its budget.
// REQUIRES: options.memory_budget >= kMinMemoryBudget.
Options WithinMemoryBudget(const Options& options);

// RocksDB's share of a budget (storage::OpenOptions::memory_bytes).
// REQUIRES: memory_budget >= kMinMemoryBudget.
size_t StorageShare(size_t memory_budget);

}  // namespace walbus::internal

#endif  // WALBUS_BUS_API_MEMORY_BUDGET_H_
