// The strict reader of --config files (see config_file.hpp).
#include "app/config_file.hpp"

#include <cctype>
#include <fstream>
#include <map>
#include <memory>

namespace ridgeline {
namespace {

bool bare_key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
}

// The longest line a config file may hold: every option's value fits many times over, and a
// line is read and scanned whole.
constexpr size_t kMaxLineLength = 4096;

// The end of `[0-9](_?[0-9])*` starting at `i`, or npos when no digit is there.
size_t digit_run(const std::string& text, size_t i) {
  auto digit = [&](size_t k) {
    return k < text.size() && std::isdigit(static_cast<unsigned char>(text[k])) != 0;
  };
  if (!digit(i)) return std::string::npos;
  for (++i; digit(i) || (text[i] == '_' && digit(i + 1));)
    i += digit(i) ? 1 : 2;
  return i;
}

// A TOML integer or float (decimal, underscores between digits), without inf and nan:
// [+-]?(0|[1-9](_?[0-9])*)(\.[0-9](_?[0-9])*)?([eE][+-]?[0-9](_?[0-9])*)?, scanned in one pass
// (a backtracking regex recursed once per character and overflowed the stack on long numbers).
bool toml_number(const std::string& text) {
  size_t i = text.size() > 0 && (text[0] == '+' || text[0] == '-') ? 1 : 0;
  i = i < text.size() && text[i] == '0' ? i + 1 : digit_run(text, i);
  if (i < text.size() && text[i] == '.') i = digit_run(text, i + 1);
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    i = digit_run(text, i);
  }
  return i == text.size();
}

std::string strip_underscores(std::string text) {
  std::string out;
  for (char c : text)
    if (c != '_') out += c;
  return out;
}

// The subcommands of `root` (every one, parsed or not).
CLI::App* find_command(CLI::App& root, const std::string& name) {
  for (CLI::App* sub : root.get_subcommands({}))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

std::string command_list(CLI::App& root) {
  std::string text;
  for (CLI::App* sub : root.get_subcommands({}))
    text += (text.empty() ? "[" : ", [") + sub->get_name() + "]";
  return text;
}

// The option a config key sets, found as CLI11 finds it (--key, -k, a positional's name);
// nullptr where the key names none that a file may set.
CLI::Option* option_for_key(CLI::App& command, const std::string& key) {
  CLI::Option* opt = command.get_option_no_throw("--" + key);
  if (opt == nullptr && key.size() == 1) opt = command.get_option_no_throw("-" + key);
  if (opt == nullptr) opt = command.get_option_no_throw(key);
  if (opt == nullptr || !opt->get_configurable() || opt == command.get_help_ptr() ||
      opt == command.get_help_all_ptr())
    return nullptr;
  return opt;
}

// Whether the option takes one number (an integer or a float), which a quoted string is not.
bool takes_number(CLI::Option& opt) {
  const std::string type = opt.get_type_name();
  if (type == "INT" || type == "UINT" || type == "FLOAT" || type == "NUMBER") return true;
  for (int v = 0;; ++v) {
    try {
      const std::string name = opt.get_validator(v)->get_name();
      if (name == "integer" || name == "number") return true;
    } catch (const CLI::OptionNotFound&) {
      return false;
    }
  }
}

// One line of the file, read left to right.
class LineReader {
public:
  LineReader(const std::string& text, const std::string& where) : m_text(text), m_where(where) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw CLI::ConfigError(m_where + ": " + problem);
  }
  [[noreturn]] void malformed(const std::string& expected) const {
    fail("malformed line '" + m_text + "': " + expected);
  }
  void skip_space() {
    while (m_pos < m_text.size() && (m_text[m_pos] == ' ' || m_text[m_pos] == '\t'))
      ++m_pos;
  }
  // True at the end of the line or at a comment (after spaces).
  bool at_end() {
    skip_space();
    return m_pos == m_text.size() || m_text[m_pos] == '#';
  }
  bool take(char c) {
    skip_space();
    if (m_pos < m_text.size() && m_text[m_pos] == c) {
      ++m_pos;
      return true;
    }
    return false;
  }
  bool peek(char c) {
    skip_space();
    return m_pos < m_text.size() && m_text[m_pos] == c;
  }
  std::string bare_key() {
    skip_space();
    const size_t start = m_pos;
    while (m_pos < m_text.size() && bare_key_char(m_text[m_pos]))
      ++m_pos;
    return m_text.substr(start, m_pos - start);
  }
  // One scalar: a quoted string, a number, true or false (as text, quotes removed; `quoted`
  // set for a string).
  std::string scalar(bool& quoted) {
    skip_space();
    if (m_pos == m_text.size()) malformed("no value after '='");
    const char open = m_text[m_pos];
    quoted = open == '"' || open == '\'';
    if (quoted) {
      std::string value;
      for (++m_pos; m_pos < m_text.size(); ++m_pos) {
        const char c = m_text[m_pos];
        if (c == open) {
          ++m_pos;
          return value;
        }
        if (c == '\\' && open == '"') {
          if (++m_pos == m_text.size()) break;
          const char e = m_text[m_pos];
          if (e == '"' || e == '\\')
            value += e;
          else if (e == 'n')
            value += '\n';
          else if (e == 't')
            value += '\t';
          else
            malformed(std::string("unknown escape '\\") + e + "' in a string");
        } else {
          value += c;
        }
      }
      malformed("a string without its closing quote");
    }
    const size_t start = m_pos;
    while (m_pos < m_text.size() && m_text[m_pos] != ' ' && m_text[m_pos] != '\t' &&
           m_text[m_pos] != ',' && m_text[m_pos] != ']' && m_text[m_pos] != '#')
      ++m_pos;
    const std::string token = m_text.substr(start, m_pos - start);
    if (token == "true" || token == "false") return token;
    if (toml_number(token)) return strip_underscores(token);
    malformed("the value '" + token + "' is not a \"quoted string\", a number, true or false");
  }
  // A scalar, or a one-line array of scalars; `quoted` is set when any of them is a string.
  std::vector<std::string> value(bool& array, bool& quoted) {
    array = take('[');
    if (!array) return {scalar(quoted)};
    std::vector<std::string> items;
    quoted = false;
    while (!take(']')) {
      if (peek('[')) malformed("arrays of arrays are not options");
      bool string = false;
      items.push_back(scalar(string));
      quoted = quoted || string;
      if (!take(',') && !peek(']')) malformed("expected ',' or ']' in an array");
    }
    if (items.empty()) malformed("an empty array");
    return items;
  }

private:
  const std::string& m_text;
  const std::string& m_where;
  size_t m_pos = 0;
};

// --config's reader: parse_config_file() on the file that --config names.
class StrictConfig : public CLI::Config {
public:
  explicit StrictConfig(CLI::App& root) : m_root(root) {}

  std::string to_config(const CLI::App* app, bool default_also, bool write_description,
                        std::string prefix) const override {
    return CLI::ConfigTOML().to_config(app, default_also, write_description, std::move(prefix));
  }

  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override {
    const CLI::Option* option = m_root.get_config_ptr();
    const std::string path =
        option != nullptr && option->count() > 0 ? option->as<std::string>() : "--config";
    std::vector<CLI::ConfigItem> items = parse_config_file(in, path, m_root);
    // The file must hold a table that the selected command reads.
    const std::vector<CLI::App*> selected = m_root.get_subcommands();
    if (!selected.empty()) {
      const std::string command = selected.front()->get_name();
      const std::vector<std::string> tables = config_tables_read_by(command);
      bool read = false;
      std::string names;
      for (const std::string& t : tables)
        names += (names.empty() ? "[" : " or [") + t + "]";
      for (const CLI::ConfigItem& item : items)
        for (const std::string& t : tables)
          read = read || item.parents.front() == t;
      if (!read)
        throw CLI::ConfigError(path + ": holds no " + names +
                               " table: nothing in it applies to `ridgeline " + command + "`");
    }
    return items;
  }

private:
  CLI::App& m_root;
};

} // namespace

std::vector<std::string> config_tables_read_by(const std::string& command) {
  if (command == "sweep") return {"sweep", "run"};
  if (command == "model") return {"model", "run"};
  return {command};
}

std::vector<CLI::ConfigItem> parse_config_file(std::istream& in, const std::string& path,
                                               CLI::App& root) {
  std::vector<CLI::ConfigItem> items;
  std::map<std::string, int> tables; // table -> line
  std::map<std::string, int> keys;   // table.key -> line
  std::string table;
  CLI::App* command = nullptr;
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    if (!text.empty() && text.back() == '\r') text.pop_back();
    const std::string where = path + ":" + std::to_string(number);
    if (text.size() > kMaxLineLength)
      throw CLI::ConfigError(where + ": a line of " + std::to_string(text.size()) +
                             " characters (at most " + std::to_string(kMaxLineLength) + ")");
    LineReader line(text, where);
    if (line.at_end()) continue;
    if (line.take('[')) {
      const std::string name = line.bare_key();
      if (name.empty() || !line.take(']') || !line.at_end())
        line.malformed("expected a table [name], key = value or a # comment");
      command = find_command(root, name);
      if (command == nullptr)
        line.fail("unknown table [" + name + "] (tables: " + command_list(root) + ")");
      const auto [first, fresh] = tables.emplace(name, number);
      if (!fresh)
        line.fail("table [" + name + "] given twice (first on line " +
                  std::to_string(first->second) + ")");
      table = name;
      continue;
    }
    const std::string key = line.bare_key();
    if (key.empty() || !line.take('='))
      line.malformed("expected a table [name], key = value or a # comment");
    bool array = false, quoted = false;
    std::vector<std::string> inputs = line.value(array, quoted);
    if (!line.at_end()) line.malformed("more text after the value (a comment starts with #)");
    if (command == nullptr)
      line.fail("'" + key +
                "' is outside a table: options go in the table of their command, e.g. [run]");
    CLI::Option* opt = option_for_key(*command, key);
    if (opt == nullptr) {
      std::string hint;
      std::string dashed = key;
      for (char& c : dashed)
        c = c == '_' ? '-' : c;
      if (dashed != key && option_for_key(*command, dashed) != nullptr)
        hint = " (did you mean '" + dashed + "'?)";
      line.fail("unknown key '" + key + "' in [" + table + "]" + hint);
    }
    const auto [first, fresh] = keys.emplace(table + "." + key, number);
    if (!fresh)
      line.fail("'" + key + "' given twice in [" + table + "] (first on line " +
                std::to_string(first->second) + ")");
    if (opt->get_expected_min() == 0) {
      // A flag: true or false.
      if (array || quoted || (inputs.front() != "true" && inputs.front() != "false"))
        line.fail("'" + key + "' is a flag: expected true or false (unquoted)");
    } else {
      if (quoted && takes_number(*opt))
        line.fail("'" + key + "' takes a number: give it unquoted (" + key + " = " +
                  inputs.front() + ")");
      // A list option takes one comma list; an option of several values takes them apart.
      if (array && opt->get_items_expected_max() <= 1) {
        std::string joined;
        for (const std::string& i : inputs)
          joined += (joined.empty() ? "" : ",") + i;
        inputs = {joined};
      }
      if (static_cast<int>(inputs.size()) > opt->get_items_expected_max())
        line.fail("'" + key + "' takes one value");
      for (std::string& input : inputs)
        for (int v = 0;; ++v) {
          CLI::Validator* check = nullptr;
          try {
            check = opt->get_validator(v);
          } catch (const CLI::OptionNotFound&) {
            break;
          }
          std::string copy = input;
          const std::string problem = (*check)(copy);
          if (!problem.empty()) line.fail(key + " = " + input + ": " + problem);
        }
    }
    CLI::ConfigItem item;
    item.parents = {table};
    item.name = key;
    item.inputs = inputs;
    items.push_back(std::move(item));
  }
  return items;
}

std::vector<CLI::ConfigItem> read_config_file(const std::string& path, CLI::App& root) {
  std::ifstream in(path);
  if (!in.good()) throw CLI::FileError::Missing(path);
  return parse_config_file(in, path, root);
}

void use_strict_config_files(CLI::App& root) {
  root.config_formatter(std::make_shared<StrictConfig>(root));
}

} // namespace ridgeline
