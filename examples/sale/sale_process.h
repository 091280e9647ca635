// The sale process: a sale reserves its items when opened, must be paid
// within a payment window (or the reservation is released: the
// compensation), and once paid must be shipped within a shipment window
// (or it is reported late). Its events and its state are FlatBuffers
// tables (the .fbs files beside this one); docs/processes.md explains
// process managers.
#ifndef WALBUS_EXAMPLES_SALE_SALE_PROCESS_H_
#define WALBUS_EXAMPLES_SALE_SALE_PROCESS_H_

#include <chrono>

#include "walbus/bus.h"
#include "walbus/process.h"

namespace sale {

struct Windows {
  std::chrono::milliseconds payment = std::chrono::minutes(15);
  std::chrono::milliseconds shipment = std::chrono::hours(48);
};

// The process's definition, its state type set to shop.sale-state.v1.
walbus::ProcessDefinition SaleProcess(Windows windows = {});

// Registers the contracts of the sale's events and of its state
// (generated from the .fbs files).
walbus::Status RegisterContracts(walbus::Bus& bus);

}  // namespace sale

#endif  // WALBUS_EXAMPLES_SALE_SALE_PROCESS_H_
