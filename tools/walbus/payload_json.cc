#include "tools/walbus/payload_json.h"

#include <vector>

#include "tools/walbus/payload_text.h"
#include "walbus/contracts.h"

namespace walbus::internal {

struct PayloadReader::Reading {
  explicit Reading(PayloadContract c) : contract(std::move(c)) {}
  PayloadContract contract;
  std::string dataschema;
};

PayloadReader::PayloadReader() = default;
PayloadReader::~PayloadReader() = default;
PayloadReader::PayloadReader(PayloadReader&&) noexcept = default;
PayloadReader& PayloadReader::operator=(PayloadReader&&) noexcept = default;

Status PayloadReader::Load(const storage::Db& db) {
  std::vector<PayloadContract> contracts;
  if (Status s = LoadLatestContracts(db, &contracts); !s.ok()) return s;
  for (PayloadContract& contract : contracts) {
    if (Status s = Add(std::move(contract)); !s.ok()) return s;
  }
  return Status::OK();
}

Status PayloadReader::Add(PayloadContract contract) {
  auto reading = std::make_unique<Reading>(std::move(contract));
  reading->dataschema = DataSchemaUri(
      reading->contract.type(),
      walbus::SchemaVersion{reading->contract.version(), SchemaHashText(reading->contract.schema().Hash()), false});
  const std::string type = reading->contract.type();
  types_[type] = std::move(reading);
  return Status::OK();
}

PayloadReading PayloadReader::Read(std::string_view type, std::string_view data) const {
  auto it = types_.find(type);
  if (it == types_.end() || !it->second->contract.Verify(data).ok()) return {};
  const Reading& reading = *it->second;
  // The text is read in place: from an aligned copy.
  const std::string copy(data);
  PayloadReading out;
  out.json = PayloadText(reading.contract.schema().schema(), copy);
  if (out.json.empty()) return {};
  out.version = reading.contract.version();
  out.dataschema = reading.dataschema;
  return out;
}

std::string PayloadReader::DataSchema(std::string_view type) const {
  auto it = types_.find(type);
  return it == types_.end() ? std::string() : it->second->dataschema;
}

}  // namespace walbus::internal
