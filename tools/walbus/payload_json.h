// Payloads of event types with a registered schema, read as JSON: what
// every command that shows an event's data shows for such a type. The
// payload is checked against the schema first (PayloadContract), and only
// a payload that passes is written as text (PayloadText), which trusts
// its input.
//
// Threading: not shared; one reader per command.
#ifndef WALBUS_TOOLS_WALBUS_PAYLOAD_JSON_H_
#define WALBUS_TOOLS_WALBUS_PAYLOAD_JSON_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/payload_contract.h"
#include "storage/db.h"
#include "walbus/status.h"

namespace walbus::internal {

// A payload as its type's schema reads it; empty json when the type has
// no schema or the payload does not pass it.
struct PayloadReading {
  // One line of JSON text (RFC 8259), as PayloadText writes it.
  std::string json;
  uint32_t version = 0;    // the schema version it passed
  std::string dataschema;  // the CloudEvents `dataschema` naming that schema
};

class PayloadReader {
 public:
  PayloadReader();
  ~PayloadReader();
  PayloadReader(PayloadReader&&) noexcept;
  PayloadReader& operator=(PayloadReader&&) noexcept;

  // Adds every type's latest accepted schema in `db`, and the hashes of
  // the earlier ones (for their dataschema).
  Status Load(const storage::Db& db);
  // Adds one contract; `hashes`, when given, are those of every version
  // of its type, version 1 first.
  Status Add(PayloadContract contract, const std::vector<uint64_t>& hashes = {});

  // `data` as the latest schema of `type` reads it (it reads what every
  // earlier version wrote), named by the version the event recorded
  // (Event::schema_version; the latest when 0 or unknown here).
  PayloadReading Read(std::string_view type, std::string_view data, uint32_t schema_version = 0) const;

 private:
  struct Reading;
  std::map<std::string, std::unique_ptr<Reading>, std::less<>> types_;
};

}  // namespace walbus::internal

#endif  // WALBUS_TOOLS_WALBUS_PAYLOAD_JSON_H_
