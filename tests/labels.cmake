# labels.cmake - a ctest label per source folder (tests/README.md): `ctest -L engine.load`
# runs what covers engine/load/. The label of a folder is its path with '/' as '.'
# (app/main.c: app.main); tests/install/test_labels.py checks that every folder has one with
# a test and every test one folder's label at least.
#
#   vitlens_label(LABEL REGEX...)  LABEL on each test of the calling directory whose name
#                                  matches one of the regexes, beside the labels it has
#                                  (memcheck, fuzz, large, package)
# Called at the end of a tests/<dir>/CMakeLists.txt, after its add_test()s.
include_guard(GLOBAL)

function(vitlens_label label)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    foreach(re IN LISTS ARGN)
      if(t MATCHES "${re}")
        set_property(TEST ${t} APPEND PROPERTY LABELS ${label})
        break()
      endif()
    endforeach()
  endforeach()
endfunction()

# Every folder's label, from the tree (clang_format and docs_test_labels carry them all).
file(GLOB_RECURSE _vitlens_src RELATIVE ${CMAKE_SOURCE_DIR} CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/app/*.[ch] ${CMAKE_SOURCE_DIR}/engine/*.[ch]
     ${CMAKE_SOURCE_DIR}/engine/*.cc)
set(VITLENS_ALL_LABELS)
foreach(f IN LISTS _vitlens_src)
  get_filename_component(d ${f} DIRECTORY)
  if(d STREQUAL "engine")  # internal.h alone: no label of its own
    continue()
  elseif(d STREQUAL "app")
    set(d app/main)
  endif()
  string(REPLACE "/" "." label ${d})
  list(APPEND VITLENS_ALL_LABELS ${label})
endforeach()
list(REMOVE_DUPLICATES VITLENS_ALL_LABELS)
