# Fixture of pytorch/pytorch cmake/public/LoadHIP.cmake at v2.9.0: how PyTorch finds ROCm, cut down to the packages
# the fixture ROCm models. As upstream: ROCM_PATH from the environment (which must then exist) or /opt/rocm, whose
# lib/cmake/hip goes on CMAKE_MODULE_PATH for FindHIP.cmake and whose prefix goes on CMAKE_PREFIX_PATH for the
# components' CMake config files (lib/cmake/<pkg>/<pkg>-config.cmake). Without FindHIP.cmake (hip-dev) HIP is not
# found and PYTORCH_FOUND_HIP stays FALSE (cmake/Dependencies.cmake then turns USE_ROCM off); with it, every REQUIRED
# component whose config is missing stops CMake with CMake's own "Could not find a package configuration file
# provided by ..." error. Those configs and headers ship in ROCm's -dev packages only (../shared/UPSTREAM.md).
#
# Upstream's REQUIRED components, in its order: hip (CONFIG), amd_comgr, rocrand, hiprand, rocblas, hipblas, miopen,
# hipfft, hipsparse, rocprim, hipcub, rocthrust, hipsolver, hiprtc, hipblaslt, hsa-runtime64 (rccl and hipsparselt
# optional). The fixture ROCm models hip, hipblas, miopen and hipblaslt; the others are left out here, and so are
# upstream's rocm_version.h read and its hipblaslt try_compile probes.
set(PYTORCH_FOUND_HIP FALSE)

if(DEFINED ENV{ROCM_PATH})
  file(TO_CMAKE_PATH "$ENV{ROCM_PATH}" ROCM_PATH)
  if(NOT EXISTS ${ROCM_PATH})
    message(FATAL_ERROR
      "ROCM_PATH environment variable is set to ${ROCM_PATH} but does not exist.\n"
      "Set a valid ROCM_PATH or unset ROCM_PATH environment variable to fix.")
  endif()
else()
  set(ROCM_PATH /opt/rocm)
  if(NOT EXISTS ${ROCM_PATH})
    message(STATUS
        "ROCM_PATH environment variable is not set and ${ROCM_PATH} does not exist.\n"
        "Building without ROCm support.")
    return()
  endif()
endif()

# Add HIP to the CMAKE Module Path
# needed because the find_package call to this module uses the Module mode search
set(CMAKE_MODULE_PATH ${ROCM_PATH}/lib/cmake/hip ${CMAKE_MODULE_PATH})

# Add ROCM_PATH to CMAKE_PREFIX_PATH, needed because the find_package
# call to individual ROCM components uses the Config mode search
list(APPEND CMAKE_PREFIX_PATH ${ROCM_PATH})

macro(find_package_and_print_version PACKAGE_NAME)
  find_package("${PACKAGE_NAME}" ${ARGN})
  if(NOT ${PACKAGE_NAME}_FOUND)
    message("Optional package ${PACKAGE_NAME} not found")
  else()
    message("${PACKAGE_NAME} VERSION: ${${PACKAGE_NAME}_VERSION}")
    if(${PACKAGE_NAME}_INCLUDE_DIR)
      list(APPEND ROCM_INCLUDE_DIRS ${${PACKAGE_NAME}_INCLUDE_DIR})
    endif()
  endif()
endmacro()

# Find the HIP Package
# MODULE argument is added for clarity that CMake is searching
# for FindHIP.cmake in Module mode
find_package_and_print_version(HIP 1.0 MODULE)

if(HIP_FOUND)
  set(PYTORCH_FOUND_HIP TRUE)
  find_package_and_print_version(hip REQUIRED CONFIG)

  # Find ROCM components using Config mode
  # These components will be searced for recursively in ${ROCM_PATH}
  message("\n***** Library versions from cmake find_package *****\n")
  find_package_and_print_version(hipblas REQUIRED)
  find_package_and_print_version(miopen REQUIRED)
  find_package_and_print_version(hipblaslt REQUIRED)

  list(REMOVE_DUPLICATES ROCM_INCLUDE_DIRS)
endif()
