# CPack's project config file (CPACK_PROJECT_CONFIG_FILE, top-level CMakeLists.txt), read
# by cpack before it packages: a build that looks for its assets and shaders in the
# source tree first would install a binary that prefers whatever that tree holds on the
# machine that built it, so it is refused.
if(CPACK_VITLENS_USE_SOURCE_TREE)
  message(FATAL_ERROR
    "vitlens: this build looks in its source tree first (VITLENS_USE_SOURCE_TREE=ON); "
    "package a build configured with\n"
    "  cmake -B build-pkg -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr "
    "-DVITLENS_USE_SOURCE_TREE=OFF")
endif()
