#include "tools/walbus/payload_json.h"

#include <algorithm>
#include <vector>

#include "tools/walbus/payload_text.h"
#include "walbus/contracts.h"

namespace walbus::internal {

struct PayloadReader::Reading {
  explicit Reading(PayloadContract c) : contract(std::move(c)) {}
  PayloadContract contract;
  // The dataschema of each version, version 1 first; empty for one whose
  // hash is not known here.
  std::vector<std::string> dataschemas;
};

PayloadReader::PayloadReader() = default;
PayloadReader::~PayloadReader() = default;
PayloadReader::PayloadReader(PayloadReader&&) noexcept = default;
PayloadReader& PayloadReader::operator=(PayloadReader&&) noexcept = default;

Status PayloadReader::Load(const storage::Db& db) {
  std::vector<PayloadContract> contracts;
  std::map<std::string, std::vector<uint64_t>> hashes;
  if (Status s = LoadLatestContracts(db, &contracts, &hashes); !s.ok()) return s;
  for (PayloadContract& contract : contracts) {
    const std::vector<uint64_t>& versions = hashes[contract.type()];
    if (Status s = Add(std::move(contract), versions); !s.ok()) return s;
  }
  return Status::OK();
}

Status PayloadReader::Add(PayloadContract contract, const std::vector<uint64_t>& hashes) {
  auto reading = std::make_unique<Reading>(std::move(contract));
  const std::string type = reading->contract.type();
  const uint32_t latest = reading->contract.version();
  reading->dataschemas.resize(std::max<size_t>(latest, hashes.size()));
  for (size_t i = 0; i < hashes.size(); ++i) {
    reading->dataschemas[i] =
        DataSchemaUri(type, walbus::SchemaVersion{static_cast<uint32_t>(i + 1), SchemaHashText(hashes[i]), false});
  }
  if (latest >= 1) {
    reading->dataschemas[latest - 1] =
        DataSchemaUri(type, walbus::SchemaVersion{latest, SchemaHashText(reading->contract.schema().Hash()), false});
  }
  types_[type] = std::move(reading);
  return Status::OK();
}

PayloadReading PayloadReader::Read(std::string_view type, std::string_view data, uint32_t schema_version) const {
  auto it = types_.find(type);
  if (it == types_.end() || !it->second->contract.Verify(data).ok()) return {};
  const Reading& reading = *it->second;
  // The text is read in place: from an aligned copy.
  const std::string copy(data);
  PayloadReading out;
  out.json = PayloadText(reading.contract.schema().schema(), copy);
  if (out.json.empty()) return {};
  const bool recorded = schema_version >= 1 && schema_version <= reading.dataschemas.size() &&
                        !reading.dataschemas[schema_version - 1].empty();
  out.version = recorded ? schema_version : reading.contract.version();
  out.dataschema = out.version >= 1 ? reading.dataschemas[out.version - 1] : std::string();
  return out;
}

}  // namespace walbus::internal
