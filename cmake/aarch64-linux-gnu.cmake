# Cross compilation for 64-bit ARM Linux with Debian's g++-aarch64-linux-gnu (tools/test-aarch64.sh).
# Libraries and headers come from the cross sysroot only; programs from the host. Binaries run
# under qemu-user with the sysroot's loader and libc.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
find_program(BOLTRT_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(BOLTRT_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${BOLTRT_QEMU_AARCH64} -L /usr/aarch64-linux-gnu)
endif()
