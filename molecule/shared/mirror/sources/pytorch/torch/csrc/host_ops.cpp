// Host-only code, as most of PyTorch's C++ is (ATen's CPU kernels, the dispatcher, autograd): compiled without
// --offload-arch, so its object is the same for every arch list and a ccache shared by the build keys reuses it.
#include <cmath>
#include <string>

extern "C" int torch_fixture_host_ops(int n) {
    std::string name = "host";
    return static_cast<int>(std::sqrt(static_cast<double>(n))) + static_cast<int>(name.size());
}
