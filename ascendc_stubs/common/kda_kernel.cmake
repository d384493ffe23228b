# Build rules shared by the kernel folders (kda_chunk_v3/, kda_chunk_v4/): kda_kernel(NAME) builds
# op_kernel/NAME.cpp, with ascendc_stubs/common on the include path.
#
#   RUN_MODE=host (default): g++ -std=c++17 against the host emulation in ../host (no CANN needed): NAME_emu from
#                            host_emu_main.cpp, plus one variant per KDA_FAULT_VARIANTS entry (NAME_emu_drop_wait3)
#   RUN_MODE=npu:            CANN's ascendc CMake module compiles the kernel for SOC_VERSION into a static library
#                            NAME_kernels (not run here; see ../README.md, "On real hardware")
set(RUN_MODE "host" CACHE STRING "host: CPU emulation; npu: CANN ascendc toolchain")
set(SOC_VERSION "Ascend910B2" CACHE STRING "NPU model for RUN_MODE=npu")
set(KDA_FAULT_VARIANTS "" CACHE STRING
    "host only: extra builds with one fault injected, e.g. KDA_DROP_WAIT=3;KDA_DROP_SET=4")
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(KDA_COMMON_DIR ${CMAKE_CURRENT_LIST_DIR})

function(kda_kernel name)
    if(RUN_MODE STREQUAL "npu")
        set(ASCEND_CANN_PACKAGE_PATH "$ENV{ASCEND_HOME_PATH}" CACHE PATH "CANN installation (ascend-toolkit/latest)")
        if(EXISTS ${ASCEND_CANN_PACKAGE_PATH}/tools/tikcpp/ascendc_kernel_cmake)
            set(ASCENDC_CMAKE_DIR ${ASCEND_CANN_PACKAGE_PATH}/tools/tikcpp/ascendc_kernel_cmake)
        elseif(EXISTS ${ASCEND_CANN_PACKAGE_PATH}/compiler/tikcpp/ascendc_kernel_cmake)
            set(ASCENDC_CMAKE_DIR ${ASCEND_CANN_PACKAGE_PATH}/compiler/tikcpp/ascendc_kernel_cmake)
        elseif(EXISTS ${ASCEND_CANN_PACKAGE_PATH}/ascendc_devkit/tikcpp/samples/cmake)
            set(ASCENDC_CMAKE_DIR ${ASCEND_CANN_PACKAGE_PATH}/ascendc_devkit/tikcpp/samples/cmake)
        else()
            message(FATAL_ERROR "ascendc_kernel_cmake not found under ${ASCEND_CANN_PACKAGE_PATH}: "
                                "source set_env.sh of the CANN toolkit first")
        endif()
        include(${ASCENDC_CMAKE_DIR}/ascendc.cmake)
        # The kernel as a static library of device code (SOC_VERSION is read by ascendc.cmake).
        ascendc_library(${name}_kernels STATIC op_kernel/${name}.cpp)
        ascendc_include_directories(${name}_kernels PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${KDA_COMMON_DIR})
    elseif(RUN_MODE STREQUAL "host")
        if(NOT TARGET ascendc_host_emu)   # configured on its own rather than from ../CMakeLists.txt
            add_subdirectory(${KDA_COMMON_DIR}/../host ${CMAKE_BINARY_DIR}/host)
        endif()
        kda_emu_target(${name}_emu -O1)
        # A kernel's own fault list (KDA_FAULTS_<name>) replaces the shared one: v5 numbers its syncs per pass.
        if(DEFINED KDA_FAULTS_${name})
            set(faults ${KDA_FAULTS_${name}})
        else()
            set(faults ${KDA_FAULT_VARIANTS})
        endif()
        foreach(fault IN LISTS faults)
            string(REGEX REPLACE "^KDA_([A-Z_]+)=([0-9]+)$" "\\1\\2" suffix "${fault}")
            string(TOLOWER "${suffix}" suffix)
            kda_emu_target(${name}_emu_${suffix} -O0 ${fault})   # quick to build; they only have to fail
        endforeach()
    else()
        message(FATAL_ERROR "RUN_MODE must be host or npu, got '${RUN_MODE}'")
    endif()
endfunction()

function(kda_emu_target target opt)
    add_executable(${target} host_emu_main.cpp)
    target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${KDA_COMMON_DIR})
    target_link_libraries(${target} PRIVATE ascendc_host_emu)
    target_compile_options(${target} PRIVATE ${opt} -Wall -Wextra -Wno-unused-parameter)
    target_compile_definitions(${target} PRIVATE ${ARGN})
endfunction()
