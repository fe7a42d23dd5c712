#include "device_options.h"

namespace boltrt::cli {

void add_device_option(CLI::App& app, std::string* device) {
  app.add_option("--device", *device,
                 "where the model runs: cpu, cuda, or auto (cuda when a usable GPU is present). "
                 "The CPU is\n"
                 "the default until the CUDA path has been verified on a GPU")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
}

}  // namespace boltrt::cli
