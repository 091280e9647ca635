#include "bus/core/schema_compat.h"

#include <flatbuffers/reflection_generated.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include "storage/keys.h"

namespace walbus::internal {
namespace {

using reflection::BaseType;

std::string Str(const flatbuffers::String* s) { return s == nullptr ? std::string() : s->str(); }

// The collected violations of one comparison.
class Violations {
 public:
  void Add(std::string line) { lines_.push_back(std::move(line)); }
  std::vector<std::string> Take() { return std::move(lines_); }
  bool empty() const { return lines_.empty(); }

 private:
  std::vector<std::string> lines_;
};

bool IsScalar(BaseType t) { return t >= BaseType::UType && t <= BaseType::Double; }

// A type as the schema spells it, with the table or enum it names (and an
// enum's underlying type, which is what the bytes hold).
std::string TypeText(const reflection::Schema& s, const reflection::Type& t) {
  auto named = [&](BaseType base) -> std::string {
    const int32_t index = t.index();
    if (index < 0) return reflection::EnumNameBaseType(base);
    if (base == BaseType::Obj) {
      return index < static_cast<int32_t>(s.objects()->size()) ? Str(s.objects()->Get(index)->name()) : "?";
    }
    const std::string name = index < static_cast<int32_t>(s.enums()->size()) ? Str(s.enums()->Get(index)->name()) : "?";
    if (base == BaseType::Union) return "union " + name;
    if (base == BaseType::UType) return "the type tag of union " + name;
    return name + " (" + reflection::EnumNameBaseType(base) + ")";
  };
  switch (t.base_type()) {
    case BaseType::Vector: return "[" + named(t.element()) + "]";
    case BaseType::Array: return "[" + named(t.element()) + ":" + std::to_string(t.fixed_length()) + "]";
    default: return named(t.base_type());
  }
}

// Defaults compare by their bits: a NaN default is the same default as
// itself.
bool SameBits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

bool IsFloat(BaseType t) { return t == BaseType::Float || t == BaseType::Double; }

std::string DefaultText(const reflection::Field& f) {
  if (f.optional()) return "null";
  return IsFloat(f.type()->base_type()) ? std::to_string(f.default_real()) : std::to_string(f.default_integer());
}

std::map<std::string, const reflection::Object*> ObjectsByName(const reflection::Schema& s) {
  std::map<std::string, const reflection::Object*> out;
  for (const reflection::Object* o : *s.objects()) out[Str(o->name())] = o;
  return out;
}

std::map<std::string, const reflection::Enum*> EnumsByName(const reflection::Schema& s) {
  std::map<std::string, const reflection::Enum*> out;
  for (const reflection::Enum* e : *s.enums()) out[Str(e->name())] = e;
  return out;
}

std::map<uint16_t, const reflection::Field*> FieldsById(const reflection::Object& o) {
  std::map<uint16_t, const reflection::Field*> out;
  for (const reflection::Field* f : *o.fields()) out[f->id()] = f;
  return out;
}

// Two binary schemas, compared.
class Comparison {
 public:
  Comparison(const reflection::Schema& prev, const reflection::Schema& next) : prev_(prev), next_(next) {}

  std::vector<std::string> Run() {
    CompareRoot();
    const auto next_objects = ObjectsByName(next_);
    for (const auto& [name, old] : ObjectsByName(prev_)) {
      auto it = next_objects.find(name);
      if (it == next_objects.end()) {
        out_.Add((old->is_struct() ? "struct " : "table ") + name + " was deleted");
      } else if (old->is_struct() != it->second->is_struct()) {
        out_.Add(name + " changed from a " + (old->is_struct() ? "struct to a table" : "table to a struct"));
      } else if (old->is_struct()) {
        CompareStruct(name, *old, *it->second);
      } else {
        CompareTable(name, *old, *it->second);
      }
    }
    const auto next_enums = EnumsByName(next_);
    for (const auto& [name, old] : EnumsByName(prev_)) {
      auto it = next_enums.find(name);
      if (it == next_enums.end()) {
        out_.Add((old->is_union() ? "union " : "enum ") + name + " was deleted");
      } else {
        CompareEnum(name, *old, *it->second);
      }
    }
    return out_.Take();
  }

 private:
  void CompareRoot() {
    const std::string old_root = prev_.root_table() ? Str(prev_.root_table()->name()) : "";
    const std::string new_root = next_.root_table() ? Str(next_.root_table()->name()) : "";
    if (old_root != new_root) out_.Add("the root table changed from " + old_root + " to " + new_root);
    if (Str(prev_.file_ident()) != Str(next_.file_ident())) {
      out_.Add("the file identifier changed from \"" + Str(prev_.file_ident()) + "\" to \"" + Str(next_.file_ident()) +
               "\"");
    }
  }

  bool SameType(const reflection::Type& a, const reflection::Type& b) const {
    return a.base_type() == b.base_type() && a.element() == b.element() && a.fixed_length() == b.fixed_length() &&
           TypeText(prev_, a) == TypeText(next_, b);
  }

  void CompareStruct(const std::string& name, const reflection::Object& old, const reflection::Object& now) {
    bool same = old.bytesize() == now.bytesize() && old.minalign() == now.minalign() &&
                old.fields()->size() == now.fields()->size();
    const auto old_fields = FieldsById(old), new_fields = FieldsById(now);
    for (auto it = old_fields.begin(); same && it != old_fields.end(); ++it) {
      auto match = new_fields.find(it->first);
      same = match != new_fields.end() && Str(it->second->name()) == Str(match->second->name()) &&
             it->second->offset() == match->second->offset() && SameType(*it->second->type(), *match->second->type());
    }
    if (!same) out_.Add("struct " + name + " changed: a struct's layout can never change");
  }

  void CompareTable(const std::string& name, const reflection::Object& old, const reflection::Object& now) {
    const auto old_fields = FieldsById(old), new_fields = FieldsById(now);
    for (const auto& [id, f] : old_fields) {
      const std::string field = name + "." + Str(f->name());
      auto it = new_fields.find(id);
      if (it == new_fields.end()) {
        out_.Add(field + " (id " + std::to_string(id) + ") was removed: deprecate it instead");
        continue;
      }
      CompareField(field, *f, *it->second);
    }
    for (const auto& [id, f] : new_fields) {
      if (old_fields.count(id) == 0 && f->required()) {
        out_.Add(name + "." + Str(f->name()) + " is new and required: data written before it has none");
      }
    }
  }

  void CompareField(const std::string& field, const reflection::Field& old, const reflection::Field& now) {
    if (Str(old.name()) != Str(now.name())) {
      out_.Add(field + " (id " + std::to_string(old.id()) + ") was renamed to " + Str(now.name()) +
               ": JSON and generated code know it by name; deprecate it and add a field");
    }
    if (!SameType(*old.type(), *now.type())) {
      out_.Add(field + " changed type from " + TypeText(prev_, *old.type()) + " to " + TypeText(next_, *now.type()));
      return;  // its default and the rest mean something else now
    }
    if (IsScalar(old.type()->base_type()) &&
        (old.optional() != now.optional() || old.default_integer() != now.default_integer() ||
         !SameBits(old.default_real(), now.default_real()))) {
      out_.Add(field + " changed its default from " + DefaultText(old) + " to " + DefaultText(now));
    }
    if (old.required() && now.deprecated() && !old.deprecated()) {
      // flatc keeps checking a deprecated field's `required` but generates
      // no setter for it; without `required`, older readers refuse.
      out_.Add(field +
               " was required and is now deprecated: readers of the earlier version reject data without it, "
               "and a producer of this one cannot write it");
    } else if (old.required() != now.required()) {
      out_.Add(field + (now.required() ? " became required" : " is no longer required") +
               ": readers of the other version reject data without it");
    }
  }

  void CompareEnum(const std::string& name, const reflection::Enum& old, const reflection::Enum& now) {
    const std::string kind = old.is_union() ? "union " : "enum ";
    if (old.is_union() != now.is_union()) {
      out_.Add(kind + name + " changed between enum and union");
      return;
    }
    if (old.underlying_type()->base_type() != now.underlying_type()->base_type()) {
      out_.Add(kind + name + " changed its underlying type from " +
               reflection::EnumNameBaseType(old.underlying_type()->base_type()) + " to " +
               reflection::EnumNameBaseType(now.underlying_type()->base_type()));
    }
    std::map<std::string, const reflection::EnumVal*> new_values;
    for (const reflection::EnumVal* v : *now.values()) new_values[Str(v->name())] = v;
    int64_t old_max = INT64_MIN;
    for (const reflection::EnumVal* v : *old.values()) {
      old_max = std::max(old_max, v->value());
      const std::string value = name + "." + Str(v->name());
      auto it = new_values.find(Str(v->name()));
      if (it == new_values.end()) {
        out_.Add(kind + "value " + value + " was removed");
      } else if (it->second->value() != v->value()) {
        out_.Add(kind + "value " + value + " changed from " + std::to_string(v->value()) + " to " +
                 std::to_string(it->second->value()));
      } else if (old.is_union() && v->union_type() != nullptr && it->second->union_type() != nullptr &&
                 TypeText(prev_, *v->union_type()) != TypeText(next_, *it->second->union_type())) {
        out_.Add("union member " + value + " changed from " + TypeText(prev_, *v->union_type()) + " to " +
                 TypeText(next_, *it->second->union_type()));
      }
    }
    if (!old.is_union()) return;
    std::map<std::string, int64_t> old_values;
    for (const reflection::EnumVal* v : *old.values()) old_values[Str(v->name())] = v->value();
    for (const reflection::EnumVal* v : *now.values()) {
      if (old_values.count(Str(v->name())) == 0 && v->value() <= old_max) {
        out_.Add("union member " + name + "." + Str(v->name()) + " was added before the end (" +
                 std::to_string(v->value()) + "): add members after the last one");
      }
    }
  }

  const reflection::Schema& prev_;
  const reflection::Schema& next_;
  Violations out_;
};

// A Type's base type and element as stored: reflection's accessors cast
// the byte to BaseType, undefined for a value the enum does not have, so
// a schema is read through them only once these are known to be in range.
bool KnownTypes(const reflection::Type& t) {
  const auto* table = reinterpret_cast<const flatbuffers::Table*>(&t);
  for (auto field : {reflection::Type::VT_BASE_TYPE, reflection::Type::VT_ELEMENT}) {
    const int8_t raw = table->GetField<int8_t>(field, 0);
    if (raw < 0 || raw >= reflection::MaxBaseType) return false;
  }
  return true;
}

// A table's fields as flatc numbers them: ids 0, 1, 2, ... with none
// missing, each at the vtable slot its id gives, and a union's value
// after its type tag, `<value>_type` of the same union, and no other tag. Payloads are read
// at these slots (reflection reads a union's tag in the slot before its
// value), and a schema that breaks them could not be written as source.
bool TableSlotsFit(const reflection::Object& o) {
  std::vector<const reflection::Field*> by_id(o.fields()->size(), nullptr);
  for (const reflection::Field* f : *o.fields()) {
    if (f->id() >= by_id.size() || f->offset() != flatbuffers::FieldIndexToOffset(f->id())) return false;
    by_id[f->id()] = f;
  }
  size_t tags = 0, unions = 0;
  for (const reflection::Field* f : by_id) {
    const reflection::Type& t = *f->type();
    const bool vector = t.base_type() == BaseType::Vector;
    tags += (vector ? t.element() : t.base_type()) == BaseType::UType;
    if ((vector ? t.element() : t.base_type()) != BaseType::Union) continue;
    ++unions;
    const reflection::Field* tag = f->id() == 0 ? nullptr : by_id[f->id() - 1];
    if (tag == nullptr || Str(tag->name()) != Str(f->name()) + "_type" || tag->type()->index() != t.index() ||
        (vector ? tag->type()->base_type() != BaseType::Vector || tag->type()->element() != BaseType::UType
                : tag->type()->base_type() != BaseType::UType)) {
      return false;
    }
  }
  return tags == unions;  // each tag is one union's, the field after it
}

// A field's type as flatc writes one: in a table a scalar, string, table,
// struct, union or union tag, or a vector of one; in a struct a scalar, a
// struct or a fixed array of either. An enum index names a union exactly
// where the type is a union or its tag, and an enum only of its own
// integer type.
// REQUIRES: the type's indices are in range.
bool FieldTypeFits(const reflection::Schema& s, const reflection::Type& t, bool in_struct) {
  const BaseType base = t.base_type();
  const bool vector = base == BaseType::Vector, array = base == BaseType::Array;
  const BaseType element = vector || array ? t.element() : base;
  if (element == BaseType::None || element == BaseType::Vector || element == BaseType::Array) return false;
  // Only an array has a length, only a vector or array an element type.
  if ((!array && t.fixed_length() != 0) || (!vector && !array && t.element() != BaseType::None)) return false;
  const bool union_typed = element == BaseType::Union || element == BaseType::UType;
  if (in_struct ? vector || union_typed || element == BaseType::String : array) return false;
  if (element == BaseType::Obj) return true;  // a struct's are checked with its layout
  if (t.index() < 0) return !union_typed;
  if (!union_typed && (element < BaseType::Byte || element > BaseType::ULong)) return false;
  const reflection::Enum& e = *s.enums()->Get(t.index());
  // An enum's field has the enum's own integer type.
  return e.is_union() == union_typed && (union_typed || e.underlying_type()->base_type() == element);
}

// Whether an integer default fits its field's type as flatc stores it (a
// bool's is 0 or 1). A ulong's is never negative: flatc stores a ulong
// default above 2^63-1 as 0, so no schema of its has the bits of one.
bool DefaultInRange(BaseType t, int64_t v) {
  switch (t) {
    case BaseType::Bool: return v == 0 || v == 1;
    case BaseType::Byte: return v >= INT8_MIN && v <= INT8_MAX;
    case BaseType::UByte: return v >= 0 && v <= UINT8_MAX;
    case BaseType::Short: return v >= INT16_MIN && v <= INT16_MAX;
    case BaseType::UShort: return v >= 0 && v <= UINT16_MAX;
    case BaseType::Int: return v >= INT32_MIN && v <= INT32_MAX;
    case BaseType::UInt: return v >= 0 && v <= UINT32_MAX;
    case BaseType::ULong: return v >= 0;
    default: return true;
  }
}

// A scalar field's default as flatc stores it: in default_integer for an
// integer or bool, in default_real for a float, the other zero, and both
// zero for an optional scalar (its default is null) and a union's tag,
// and within the range of its type.
bool DefaultFits(const reflection::Field& f) {
  const BaseType t = f.type()->base_type();
  const bool real = t == BaseType::Float || t == BaseType::Double;
  const bool no_integer = real || f.optional() || t == BaseType::UType;
  const bool no_real = !real || f.optional();
  if ((no_integer && f.default_integer() != 0) || (no_real && std::bit_cast<uint64_t>(f.default_real()) != 0)) {
    return false;
  }
  // flatc stores every NaN default, "-nan" too, as the one quiet NaN.
  if (std::isnan(f.default_real()) && std::bit_cast<uint64_t>(f.default_real()) != 0x7ff8000000000000ull) {
    return false;
  }
  return no_integer || DefaultInRange(t, f.default_integer());
}

// A table's key as flatc allows it: at most one field, a scalar or a
// string, and a string key required (flatc makes it so).
bool KeyFits(const reflection::Object& o) {
  int keys = 0;
  for (const reflection::Field* f : *o.fields()) {
    if (!f->key()) continue;
    const BaseType t = f->type()->base_type();
    const bool scalar = t >= BaseType::Bool && t <= BaseType::Double;
    if (++keys > 1 || !(scalar || (t == BaseType::String && f->required()))) return false;
  }
  return true;
}

// A struct laid out as flatc lays it out: fields numbered 0, 1, 2, ...,
// each (a scalar, a struct, a fixed array of either) at the next offset
// its alignment allows, the size rounded up to the struct's alignment,
// which is at least each field's. Reflection reads a struct's fields at their stored offsets
// within its stored size: any other layout reads past the struct.
bool StructLayoutFits(const reflection::Schema& s, const reflection::Object& o) {
  std::vector<const reflection::Field*> fields(o.fields()->begin(), o.fields()->end());
  std::sort(fields.begin(), fields.end(), [](const auto* a, const auto* b) { return a->id() < b->id(); });
  uint64_t end = 0;
  uint32_t align = 1;
  for (size_t i = 0; i < fields.size(); ++i) {
    const reflection::Field* f = fields[i];
    if (f->id() != i) return false;  // numbered 0, 1, 2, ... in order
    const reflection::Type& t = *f->type();
    const bool array = t.base_type() == BaseType::Array;
    const BaseType base = array ? t.element() : t.base_type();
    uint64_t size = ScalarBytes(base);
    uint32_t field_align = static_cast<uint32_t>(size);
    if (base == BaseType::Obj) {
      const reflection::Object& inner = *s.objects()->Get(t.index());
      if (!inner.is_struct() || &inner == &o) return false;
      size = static_cast<uint32_t>(inner.bytesize());
      field_align = static_cast<uint32_t>(inner.minalign());
    }
    if (size == 0 || (array && t.fixed_length() == 0)) return false;
    if (array) size *= t.fixed_length();
    const uint64_t offset = (end + field_align - 1) / field_align * field_align;
    if (f->offset() != offset) return false;
    end = offset + size;
    align = std::max(align, field_align);
  }
  const uint32_t minalign = static_cast<uint32_t>(o.minalign());
  return minalign >= align && static_cast<uint64_t>(o.bytesize()) == (end + minalign - 1) / minalign * minalign &&
         o.bytesize() > 0;
}

// An enum value without a type, as every one but a union's members is:
// none stored, or one of nothing.
bool HasNoType(const reflection::EnumVal& v) {
  const reflection::Type* t = v.union_type();
  return t == nullptr || (t->base_type() == BaseType::None && t->element() == BaseType::None && t->index() == -1 &&
                          t->fixed_length() == 0);
}

// A union's members as flatc writes them: NONE = 0 without a type, always
// there, and every other (a tag of 1 to 255) a table, a struct or a string.
bool UnionMemberFits(const reflection::EnumVal& v) {
  if (v.value() == 0) return Str(v.name()) == "NONE" && HasNoType(v);
  const reflection::Type* t = v.union_type();
  if (t == nullptr || t->element() != BaseType::None || t->fixed_length() != 0) return false;
  const bool table = t->base_type() == BaseType::Obj, text = t->base_type() == BaseType::String && t->index() == -1;
  return v.value() > 0 && v.value() <= 255 && (table || text);
}

// Whether every index of `t` names what it must: a table or struct for an
// object, a union for a union or its tag, an enum or nothing for a
// scalar. Reflection and flatc's Parser::Deserialize index with them
// unchecked; the verifier checks the bytes, not what they point at.
bool IndicesFit(const reflection::Schema& s, const reflection::Type* t) {
  if (t == nullptr) return true;
  if (!KnownTypes(*t)) return false;
  const int32_t objects = static_cast<int32_t>(s.objects()->size()), enums = static_cast<int32_t>(s.enums()->size());
  const BaseType base =
      t->base_type() == BaseType::Vector || t->base_type() == BaseType::Array ? t->element() : t->base_type();
  const int32_t index = t->index();
  if (base == BaseType::Obj) return index >= 0 && index < objects;
  if (base == BaseType::Union || base == BaseType::UType) return index >= 0 && index < enums;
  return index < enums;  // -1, or the enum of a scalar
}

// Enums as flatc writes them: unique names, an integer underlying type
// and values (a union's start with NONE), each value typed as its kind
// of enum allows.
bool EnumsWellFormed(const reflection::Schema& s) {
  std::set<std::string> names;
  for (const reflection::Enum* e : *s.enums()) {
    if (e->name() == nullptr || e->values() == nullptr || e->underlying_type() == nullptr ||
        !KnownTypes(*e->underlying_type()) || !names.insert(e->name()->str()).second) {
      return false;
    }
    // Values are sorted by value.
    const BaseType underlying = e->underlying_type()->base_type();
    if (e->values()->size() == 0 || (e->is_union() ? underlying != BaseType::UType || e->values()->Get(0)->value() != 0
                                                   : underlying < BaseType::Byte || underlying > BaseType::ULong)) {
      return false;
    }
    std::set<std::string> value_names;
    for (const reflection::EnumVal* v : *e->values()) {
      if (v->name() == nullptr || !IndicesFit(s, v->union_type()) || !value_names.insert(v->name()->str()).second ||
          (e->is_union() ? !UnionMemberFits(*v) : !HasNoType(*v))) {
        return false;
      }
    }
  }
  return true;
}

// Tables and structs as flatc writes them: unique names, fields with
// unique ids of types flatc gives, tables numbered, slotted and keyed as
// flatc does it, defaults stored as it stores them, structs aligned to a
// power of two and laid out as it lays them out.
// REQUIRES: EnumsWellFormed(s); field types are read through the enums.
bool ObjectsWellFormed(const reflection::Schema& s) {
  std::set<std::string> names;
  for (const reflection::Object* o : *s.objects()) {
    if (o->name() == nullptr || o->fields() == nullptr || !names.insert(o->name()->str()).second) return false;
    if (o->is_struct() && !std::has_single_bit(static_cast<uint32_t>(o->minalign()))) return false;
    std::set<uint16_t> ids;
    for (const reflection::Field* f : *o->fields()) {
      if (f->name() == nullptr || f->type() == nullptr || !IndicesFit(s, f->type()) || !ids.insert(f->id()).second ||
          !FieldTypeFits(s, *f->type(), o->is_struct()) || !DefaultFits(*f)) {
        return false;
      }
    }
    if (!o->is_struct() && (!TableSlotsFit(*o) || !KeyFits(*o))) return false;
  }
  // Every struct's fields are known to be well typed before any layout
  // is read through them.
  for (const reflection::Object* o : *s.objects()) {
    if (o->is_struct() && !StructLayoutFits(s, *o)) return false;
  }
  return true;
}

// Whether the schema is one flatc could have written, so that reflection
// reads it only where it holds what it says, and its source written back
// reads as the same schema. Names and field ids are unique (the
// comparison looks things up by them), and the root is one of the
// schema's tables (flatc stores it once, there).
bool WellFormed(const reflection::Schema& s) {
  if (!EnumsWellFormed(s) || !ObjectsWellFormed(s)) return false;
  const reflection::Object* root = s.root_table();
  return root == nullptr ||
         (!root->is_struct() && std::find(s.objects()->begin(), s.objects()->end(), root) != s.objects()->end());
}

}  // namespace

Result<BinarySchema> BinarySchema::FromBytes(std::string bytes) {
  if (bytes.size() > kMaxSchemaBytes) {
    return Status::InvalidArgument("a binary schema of " + std::to_string(bytes.size()) + " bytes: at most " +
                                   std::to_string(kMaxSchemaBytes));
  }
  flatbuffers::Verifier verifier(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (bytes.empty() || !reflection::VerifySchemaBuffer(verifier)) {
    return Status::InvalidArgument("not a FlatBuffers binary schema (.bfbs, as flatc --binary --schema writes)");
  }
  BinarySchema schema(std::move(bytes));
  if (!WellFormed(schema.schema())) {
    return Status::InvalidArgument(
        "the binary schema refers to tables or enums it does not hold, lays out a struct as flatc would not, or "
        "repeats a name or a field id");
  }
  if (schema.schema().root_table() == nullptr) {
    return Status::InvalidArgument("the schema has no root_type: an event type's schema names its root table");
  }
  return schema;
}

const reflection::Schema& BinarySchema::schema() const { return *reflection::GetSchema(bytes_.data()); }

std::string BinarySchema::RootName() const { return Str(schema().root_table()->name()); }

uint64_t BinarySchema::Hash() const {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (char c : bytes_) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return hash;
}

std::vector<std::string> CompatibilityViolations(const BinarySchema& prev, const BinarySchema& next) {
  return Comparison(prev.schema(), next.schema()).Run();
}

uint32_t ScalarBytes(BaseType t) {
  switch (t) {
    case BaseType::UType:
    case BaseType::Bool:
    case BaseType::Byte:
    case BaseType::UByte: return 1;
    case BaseType::Short:
    case BaseType::UShort: return 2;
    case BaseType::Int:
    case BaseType::UInt:
    case BaseType::Float: return 4;
    case BaseType::Long:
    case BaseType::ULong:
    case BaseType::Double: return 8;
    default: return 0;
  }
}

std::string SchemaHashText(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

Status LoadAcceptedSchemas(const storage::Db& db, const std::string& type, std::vector<storage::SchemaRecord>* out) {
  out->clear();
  Status bad;
  Status scan = db.Scan(
      storage::Cf::kMeta, storage::SchemaKeyPrefix(type), SIZE_MAX, [&](std::string_view key, std::string_view value) {
        storage::SchemaRecord record;
        const auto version = static_cast<uint32_t>(out->size() + 1);
        if (key != storage::SchemaKey(type, version) || !storage::DecodeSchema(value, &record) ||
            !BinarySchema::FromBytes(record.binary_schema).ok()) {
          bad = Status::Corruption("stored schema " + std::to_string(version) + " of " + type + " is unreadable");
          return false;
        }
        out->push_back(std::move(record));
        return true;
      });
  return scan.ok() ? bad : scan;
}

Status ListSchemaTypes(const storage::Db& db, std::vector<std::string>* types) {
  types->clear();
  const std::string prefix = storage::SchemaKeyPrefix("");
  return db.Scan(storage::Cf::kMeta, prefix, SIZE_MAX, [&](std::string_view key, std::string_view) {
    const size_t end = key.find('\0', prefix.size());
    if (end == std::string_view::npos) return true;  // not a schema key
    std::string_view type = key.substr(prefix.size(), end - prefix.size());
    if (types->empty() || types->back() != type) types->emplace_back(type);
    return true;
  });
}

}  // namespace walbus::internal
