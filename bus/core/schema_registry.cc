#include "bus/core/schema_registry.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <mutex>

namespace walbus::internal {

std::string_view TypeBaseName(std::string_view type) { return type.substr(0, type.rfind('.')); }

std::optional<TypeVersion> SplitType(std::string_view type) {
  const size_t dot = type.rfind('.');
  if (dot == std::string_view::npos || dot + 2 > type.size() || type[dot + 1] != 'v') return std::nullopt;
  TypeVersion tv;
  auto [end, ec] = std::from_chars(type.data() + dot + 2, type.data() + type.size(), tv.version);
  if (ec != std::errc() || end != type.data() + type.size()) return std::nullopt;
  tv.base = std::string(TypeBaseName(type));
  return tv;
}

Status SchemaRegistry::AddVerifier(const std::string& type, PayloadVerifier verifier) {
  if (!verifier) return Status::InvalidArgument("no verifier given for " + type);
  WriterLock lock(&mu_);
  verifiers_[type] = std::move(verifier);
  return Status::OK();
}

Status SchemaRegistry::AddUpcaster(const std::string& from, const std::string& to, Upcaster upcaster) {
  auto f = SplitType(from);
  auto t = SplitType(to);
  if (!f || !t || f->base != t->base || t->version <= f->version) {
    return Status::InvalidArgument("an upcaster turns a type into a later version of itself; " + from + " -> " + to +
                                   " is not one");
  }
  if (!upcaster) return Status::InvalidArgument("no upcaster given for " + from);
  WriterLock lock(&mu_);
  upcasters_[from] = {to, std::move(upcaster)};
  return Status::OK();
}

void SchemaRegistry::SetContract(PayloadContract contract) {
  auto made = std::make_shared<const PayloadContract>(std::move(contract));
  WriterLock lock(&mu_);
  auto& slot = contracts_[made->type()];
  if (slot == nullptr || slot->version() < made->version()) slot = std::move(made);
}

std::shared_ptr<const PayloadContract> SchemaRegistry::Contract(std::string_view type) const {
  ReaderLock lock(&mu_);
  auto it = contracts_.find(type);
  return it == contracts_.end() ? nullptr : it->second;
}

void SchemaRegistry::SetVersionHashes(const std::string& type, std::vector<uint64_t> hashes) {
  WriterLock lock(&mu_);
  version_hashes_[type] = std::move(hashes);
}

void SchemaRegistry::AddVersionHash(const std::string& type, uint32_t version, uint64_t hash) {
  assert(version >= 1);
  WriterLock lock(&mu_);
  std::vector<uint64_t>& hashes = version_hashes_[type];
  if (hashes.size() < version) hashes.resize(version);
  hashes[version - 1] = hash;
}

std::optional<uint64_t> SchemaRegistry::VersionHash(std::string_view type, uint32_t version) const {
  ReaderLock lock(&mu_);
  auto it = version_hashes_.find(type);
  if (version == 0 || it == version_hashes_.end() || it->second.size() < version) return std::nullopt;
  return it->second[version - 1];
}

Status SchemaRegistry::Verify(std::string_view type, std::string_view data, uint32_t* schema_version) const {
  ReaderLock lock(&mu_);
  if (schema_version != nullptr) *schema_version = 0;
  auto contract = contracts_.find(type);
  if (contract != contracts_.end()) {
    if (Status s = contract->second->Verify(data); !s.ok()) return s;
    if (schema_version != nullptr) *schema_version = contract->second->version();
  } else if (require_contracts_) {
    return Status::InvalidArgument("event type " + std::string(type) +
                                   " has no registered schema, and this bus requires one for every type "
                                   "(Options::require_schemas)");
  }
  auto it = verifiers_.find(type);
  if (it == verifiers_.end()) return Status::OK();
  Status s = it->second(data);
  if (s.ok()) return s;
  return Status::InvalidArgument("payload of " + std::string(type) + " fails its verifier: " + s.message());
}

bool SchemaRegistry::CanArrive(std::string_view type) const {
  ReaderLock lock(&mu_);
  // Backwards along the upcasters: which type is upcast to `wanted`.
  std::string wanted(type);
  for (size_t hops = 0; hops < 64; ++hops) {
    if (contracts_.count(wanted) != 0) return true;
    auto from = std::find_if(upcasters_.begin(), upcasters_.end(),
                             [&](const auto& upcaster) { return upcaster.second.first == wanted; });
    if (from == upcasters_.end()) return false;
    wanted = from->first;
  }
  return false;
}

std::vector<std::string> SchemaRegistry::ContractTypes() const {
  ReaderLock lock(&mu_);
  std::vector<std::string> types;
  for (const auto& [type, contract] : contracts_) types.push_back(type);
  return types;
}

Result<SchemaRegistry::Resolution> SchemaRegistry::Resolve(const Event& event, const std::vector<std::string>& wanted,
                                                           Event* out) const {
  if (wanted.empty() || std::find(wanted.begin(), wanted.end(), event.type) != wanted.end()) {
    return Resolution::kAsIs;
  }
  auto have = SplitType(event.type);
  const bool same_base = have && std::any_of(wanted.begin(), wanted.end(), [&](const std::string& w) {
                           auto tv = SplitType(w);
                           return tv && tv->base == have->base;
                         });
  if (!same_base) return Resolution::kNotWanted;
  ReaderLock lock(&mu_);
  Event current = event;
  for (size_t hops = 0; hops < 64; ++hops) {
    auto it = upcasters_.find(current.type);
    if (it == upcasters_.end()) return Resolution::kNoTranslator;
    const std::string& to = it->second.first;
    Result<std::string> data = it->second.second(current);
    if (!data.ok()) {
      return Status::InvalidArgument("upcasting " + current.type + " to " + to + " failed: " + data.status().message());
    }
    current.type = to;
    current.data = std::move(*data);
    if (std::find(wanted.begin(), wanted.end(), current.type) != wanted.end()) {
      *out = std::move(current);
      return Resolution::kUpcast;
    }
  }
  return Resolution::kNoTranslator;
}

}  // namespace walbus::internal
