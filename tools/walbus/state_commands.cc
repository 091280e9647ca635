// walbus get DIR CF KEY and walbus scan DIR CF: the application's column
// families, read through a secondary instance, so from a stopped database
// or one a running process holds. Keys and values print as text when they
// are UTF-8 without control characters, else as 0x and hex digits.
#include <iostream>
#include <memory>
#include <string>

#include "bus/core/state_reader.h"
#include "bus/util/hex.h"
#include "tools/walbus/commands.h"
#include "tools/walbus/inspect_util.h"

namespace walbus::tools {
namespace {

namespace wi = walbus::internal;
namespace iu = walbus::internal::inspect_util;

struct StateValues {
  std::string dir;
  std::string column_family;
  std::string key;  // get
  ScanOptions scan;
  bool json = false;
  bool hex = false;       // print every key and value in hex
  bool keys_hex = false;  // the keys given are hex
};

bool Printable(std::string_view bytes, bool force_hex) { return !force_hex && iu::IsValidTextWithoutControls(bytes); }

std::string Text(std::string_view bytes, bool force_hex) {
  return Printable(bytes, force_hex) ? std::string(bytes) : "0x" + wi::HexEncode(bytes);
}

// "name":"text" or "name_hex":"digits".
std::string JsonField(std::string_view name, std::string_view bytes, bool force_hex) {
  if (Printable(bytes, force_hex)) return "\"" + std::string(name) + "\":" + iu::JsonString(bytes);
  return "\"" + std::string(name) + "_hex\":\"" + wi::HexEncode(bytes) + "\"";
}

// Decodes the keys given on the command line when they are hex.
Status DecodeKeys(StateValues* v) {
  if (!v->keys_hex) return Status::OK();
  for (std::string* key : {&v->key, &v->scan.start, &v->scan.end, &v->scan.prefix, &v->scan.resume_after}) {
    std::string bytes;
    if (!wi::HexDecode(*key, &bytes)) return Status::InvalidArgument("--keys-hex: '" + *key + "' is not hex bytes");
    *key = std::move(bytes);
  }
  return Status::OK();
}

// The secondary instance and the column family to read.
Status OpenColumnFamily(const StateValues& v, iu::SecondaryView* view, storage::CfHandle** cf) {
  if (Status s = iu::OpenSecondary(v.dir, view); !s.ok()) return s;
  // The tool reads every family the database holds, listed by a running
  // bus or not.
  auto handle = wi::AppColumnFamilies(*view->db, view->db->app_cf_names()).Find(v.column_family);
  if (!handle.ok()) {
    std::string names;
    for (const std::string& n : view->db->app_cf_names()) names += (names.empty() ? "" : ", ") + n;
    return Status::InvalidArgument("no column family '" + v.column_family + "' in " + v.dir +
                                   (names.empty() ? " (it has none)" : " (it has: " + names + ")"));
  }
  *cf = *handle;
  return Status::OK();
}

int RunGet(StateValues& v) {
  if (Status s = DecodeKeys(&v); !s.ok()) return Fail("get", s);
  if (Status s = wi::CheckKey(v.column_family, v.key, /*for_write=*/false); !s.ok()) return Fail("get", s);
  iu::SecondaryView view;
  storage::CfHandle* cf = nullptr;
  if (Status s = OpenColumnFamily(v, &view, &cf); !s.ok()) return Fail("get", s);
  std::string value;
  bool found = false;
  if (Status s = view.db->Get(cf, v.key, &value, &found); !s.ok()) return Fail("get", s);
  auto version = wi::CommittedVersion(*view.db, cf, v.column_family, v.key);
  if (!version.ok()) return Fail("get", version.status());
  if (!found) {
    std::cerr << "walbus get: no key " << Text(v.key, v.hex) << " in " << v.column_family << " (version " << *version
              << ")\n";
    return 1;
  }
  if (v.json) {
    std::cout << "{" << JsonField("key", v.key, v.hex) << "," << JsonField("value", value, v.hex)
              << ",\"version\":" << *version << "}\n";
  } else {
    std::cout << Text(value, v.hex) << "\n";
  }
  return 0;
}

int RunScan(StateValues& v) {
  if (Status s = DecodeKeys(&v); !s.ok()) return Fail("scan", s);
  iu::SecondaryView view;
  storage::CfHandle* cf = nullptr;
  if (Status s = OpenColumnFamily(v, &view, &cf); !s.ok()) return Fail("scan", s);
  bool more = false, first = true;
  std::string last;
  if (v.json) std::cout << "{\"rows\":[";
  Status s = wi::ScanCommitted(
      *view.db, cf, v.scan,
      [&](std::string_view key, std::string_view value) {
        if (v.json) {
          std::cout << (first ? "" : ",") << "\n{" << JsonField("key", key, v.hex) << ","
                    << JsonField("value", value, v.hex) << "}";
        } else {
          std::cout << Text(key, v.hex) << "\t" << Text(value, v.hex) << "\n";
        }
        first = false;
        last.assign(key);
        return true;
      },
      &more);
  if (!s.ok()) {
    if (v.json) std::cout << "]}\n";
    return Fail("scan", s);
  }
  if (v.json) {
    std::cout << "]";
    if (more) std::cout << ",\n" << JsonField("resume_after", last, v.hex);
    std::cout << "}\n";
  } else if (more) {
    std::cerr << "walbus scan: showing the first " << v.scan.limit << " rows; the next page: --after "
              << (Printable(last, v.hex) ? last : wi::HexEncode(last) + " --keys-hex") << " (--limit 0 for all)\n";
  }
  return 0;
}

void AddCommonOptions(CLI::App* cmd, StateValues* v) {
  cmd->add_option("dir", v->dir, "Database directory")->required();
  cmd->add_option("column_family", v->column_family, "An application column family")->required();
  cmd->add_flag("--json", v->json, "Print JSON (keys and values that are not text as *_hex fields)");
  cmd->add_flag("--hex", v->hex, "Print every key and value in hex");
  cmd->add_flag("--keys-hex", v->keys_hex, "The keys given (KEY, --prefix, --start, --end, --after) are hex");
}

}  // namespace

void AddStateCommands(CLI::App* app, Runners* runners) {
  auto get = std::make_shared<StateValues>();
  CLI::App* get_cmd = app->add_subcommand(
      "get", "One key of an application column family: its value (--json: with its version). Exit 1 when absent.");
  AddCommonOptions(get_cmd, get.get());
  get_cmd->add_option("key", get->key, "The key")->required();
  runners->push_back([get_cmd, get]() -> std::optional<int> {
    if (!get_cmd->parsed()) return std::nullopt;
    return RunGet(*get);
  });

  auto scan = std::make_shared<StateValues>();
  scan->scan.limit = kDefaultLimit;
  CLI::App* scan_cmd = app->add_subcommand(
      "scan",
      "Rows of an application column family in key order, one \"key<TAB>value\" line each (--json: one object).");
  AddCommonOptions(scan_cmd, scan.get());
  scan_cmd->add_option("--prefix", scan->scan.prefix, "Only keys that start with this");
  scan_cmd->add_option("--start", scan->scan.start, "The first key taken (inclusive)");
  scan_cmd->add_option("--end", scan->scan.end, "The first key not taken (exclusive)");
  scan_cmd->add_option("--after", scan->scan.resume_after, "Go on strictly after this key (the next page)");
  scan_cmd->add_option("--limit", scan->scan.limit, "At most this many rows (0: all)")->capture_default_str();
  scan_cmd->add_flag("--reverse", scan->scan.reverse, "Descending key order");
  runners->push_back([scan_cmd, scan]() -> std::optional<int> {
    if (!scan_cmd->parsed()) return std::nullopt;
    return RunScan(*scan);
  });
}

}  // namespace walbus::tools
