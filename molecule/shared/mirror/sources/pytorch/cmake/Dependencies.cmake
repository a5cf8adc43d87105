# Fixture of the HIP section of pytorch/pytorch cmake/Dependencies.cmake at v2.9.0: include LoadHIP.cmake, and without
# PYTORCH_FOUND_HIP (no FindHIP.cmake under ROCM_PATH: hip-dev is not installed) upstream turns USE_ROCM off
# (caffe2_update_option(USE_ROCM OFF)) after LoadHIP's warning 'No "FindHIP.cmake" found in CMAKE_MODULE_PATH.' and
# builds torch without ROCm. This tree builds only for ROCm (setup.py), so where upstream would go on without it, the
# fixture stops and says so.
include(${CMAKE_CURRENT_LIST_DIR}/public/LoadHIP.cmake)
if(PYTORCH_FOUND_HIP)
  message(INFO "Compiling with HIP for AMD.")
else()
  message(FATAL_ERROR
    "LoadHIP.cmake found no HIP under ${ROCM_PATH} (no lib/cmake/hip/FindHIP.cmake: ROCm's hip-dev package is not "
    "installed): PyTorch's cmake/Dependencies.cmake turns USE_ROCM off here and builds torch without ROCm. Install "
    "ROCm's development packages (rocm, or rocm-ml-sdk) to build for ROCm.")
endif()
