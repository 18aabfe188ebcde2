// Collects named checks (error vs tolerance) and prints them as one JSON object.
#pragma once
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace kvt_driver {

struct Check {
  std::string name;
  bool ok;
  double err;
  double tol;
  std::string detail;
};

struct Report {
  std::vector<Check> checks;
  void add(const std::string& name, bool ok, double err, double tol, const std::string& detail = "") {
    checks.push_back({name, ok, err, tol, detail});
    std::fprintf(stderr, "%s %-48s err=%.3g tol=%.3g %s\n", ok ? "PASS" : "FAIL", name.c_str(), err,
                 tol, detail.c_str());
  }
  // err ≤ tol, with NaN failing.
  void expect_le(const std::string& name, double err, double tol, const std::string& detail = "") {
    add(name, err <= tol, err, tol, detail);
  }
  void expect_true(const std::string& name, bool ok, const std::string& detail = "") {
    add(name, ok, ok ? 0 : 1, 0, detail);
  }
  int failed() const {
    int n = 0;
    for (const auto& c : checks) n += !c.ok;
    return n;
  }
  static std::string esc(const std::string& s) {
    std::string o;
    for (char c : s) {
      if (c == '"' || c == '\\') o += '\\';
      if ((unsigned char)c < 0x20) continue;
      o += c;
    }
    return o;
  }
  void print_json(FILE* f, const std::string& extra) const {
    std::fprintf(f, "{\"passed\":%d,\"failed\":%d%s,\"checks\":[", (int)checks.size() - failed(),
                 failed(), extra.c_str());
    for (size_t i = 0; i < checks.size(); ++i) {
      const Check& c = checks[i];
      std::fprintf(f, "%s{\"name\":\"%s\",\"ok\":%s,\"err\":%.6g,\"tol\":%.6g,\"detail\":\"%s\"}",
                   i ? "," : "", esc(c.name).c_str(), c.ok ? "true" : "false",
                   std::isfinite(c.err) ? c.err : 1e300, c.tol, esc(c.detail).c_str());
    }
    std::fprintf(f, "]}\n");
  }
};

// max |a-b| / max(max |b|, floor): error relative to the reference's scale.
inline double rel_err(const float* a, const float* b, size_t n, double floor = 1e-6) {
  double num = 0, den = floor;
  for (size_t i = 0; i < n; ++i) {
    const double d = std::fabs((double)a[i] - b[i]);
    num = std::isnan(d) ? INFINITY : std::fmax(num, d);
    den = std::fmax(den, std::fabs((double)b[i]));
  }
  return num / den;
}

}  // namespace kvt_driver
