# Fixture of pytorch/pytorch cmake/External/aotriton.cmake at v2.9.0 (AOTriton 0.11b, pytorch#161754): the
# release, the ROCm releases with a prebuilt runtime, and the per-arch kernel image packs, in the same set() form
# the roles read (plugins/module_utils/build_downloads.py). The fixture's setup.py does what this file does.
set(__AOTRITON_VER "0.11b")
set(__AOTRITON_MANYLINUX_LIST "manylinux_2_28"
                              "manylinux_2_28"
                              "manylinux_2_28"
                              "manylinux_2_28")
set(__AOTRITON_ROCM_LIST "rocm6.2"
                         "rocm6.3"
                         "rocm6.4"
                         "rocm7.0")
set(__AOTRITON_BASE_URL "https://github.com/ROCm/aotriton/releases/download/")
set(__AOTRITON_IMAGE_LIST "amd-gfx90a"
                          "amd-gfx942"
                          "amd-gfx950"
                          "amd-gfx11xx"
                          "amd-gfx120x")
