// Helpers the data-reading unit tests share: a scratch folder removed at the end of the test, and the check that a
// call ends in a UserError that names what was wrong and gives a hint.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "ragtrain/core/error.hpp"

namespace ragtrain::test {

// A fresh folder under the system's temporary directory (PREFIX-XXXXXX), removed with everything in it at the end.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "ragtrain-test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    RT_CHECK(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
    dir_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  std::string dir() const { return dir_.string(); }
  const std::filesystem::path& path() const { return dir_; }
  // Writes `text` to NAME (its folders made first) and returns the file's path.
  std::string write(const std::string& name, const std::string& text) const {
    std::filesystem::create_directories((dir_ / name).parent_path());
    std::ofstream(file(name), std::ios::binary) << text;
    return file(name);
  }

 private:
  std::filesystem::path dir_;
};

// Runs f, expects a UserError whose message contains every one of `needles`, and a hint.
inline void expect_user_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no UserError thrown; expected one mentioning " << needles.front();
  } catch (const UserError& e) {
    for (const std::string& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << n << "\"";
    EXPECT_FALSE(e.hint().empty()) << "no hint for: " << e.what();
  }
}

}  // namespace ragtrain::test
