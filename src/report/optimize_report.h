// Reports of a `ksol optimize` run, from the run's JSON document (what --json prints):
// Markdown, and a self-contained HTML page (no scripts, no external resources) with SVG plots:
// each task's best-so-far over time with its failed candidates marked, %SOL per task before and
// after, and where candidates failed.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace ksol::report {

std::string optimize_markdown(const nlohmann::json& doc);
std::string optimize_html(const nlohmann::json& doc);

// Escapes text for HTML and SVG.
std::string html_escape(const std::string& s);

// The failure class of a trajectory entry: "" when it passed, else the first words of its
// error (the gate and class the harness reported, e.g. "correctness/wrong_result").
std::string failure_class(const nlohmann::json& attempt);

}  // namespace ksol::report
