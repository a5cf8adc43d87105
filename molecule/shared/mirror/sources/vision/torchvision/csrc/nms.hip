// The GPU half of torchvision's ops (csrc/ops/cuda, hipified), compiled with hipcc for every arch in PYTORCH_ROCM_ARCH.
extern "C" int torchvision_fixture_hip_ops(void) { return 1; }
