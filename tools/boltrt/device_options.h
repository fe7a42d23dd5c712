// `--device cpu|cuda|auto` for generate, chat, batch and bench. auto: CUDA when this build has
// it and a usable device is present, else the CPU; cuda without a usable device is a one-line
// error (boltrt::Error from resolve_device when the model loads).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace boltrt::cli {

// Adds --device, storing the name ("auto" by default) in *device.
void add_device_option(CLI::App& app, std::string* device);

}  // namespace boltrt::cli
