// The CUDA flavour of torch/_C's one kernel entry point; tools/amd_build/build_amd.py hipifies it.
#ifdef CUDA_FIXTURE_HEADER
#include <cuda_runtime.h>
#endif
extern "C" int torch_fixture_backend_is_cuda(void) { return 1; }
extern "C" const char *torch_fixture_backend(void) { return "cuda"; }
