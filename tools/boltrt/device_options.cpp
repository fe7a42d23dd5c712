#include "device_options.h"

namespace boltrt::cli {

void add_device_option(CLI::App& app, std::string* device) {
  app.add_option("--device", *device,
                 "where the model runs: cpu, cuda, or auto (a usable GPU that passes the\n"
                 "kernel self-check, else the CPU; an emulated device only with cuda)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
}

}  // namespace boltrt::cli
