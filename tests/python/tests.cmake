# The wpk Python package's tests (included by the top-level CMakeLists.txt): python_install
# pip-installs the package (scikit-build-core through this CMake project, its build kept in the
# build dir) into build/python-site; python_package runs tests/python against ONNX Runtime;
# python_torchvision runs resnet18 through the package and exports with torch: label "slow".
# Not in a sanitizer build: the package is built without sanitizers whatever this build is.
if(WPK_SANITIZE)
  return()
endif()
set(WPK_PY_ENV "WPK_PYTHON_SITE=${CMAKE_BINARY_DIR}/python-site"
               "WPK_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache"
               "WPK_TORCHVISION_DIR=${CMAKE_BINARY_DIR}/torchvision")
add_test(NAME python_install
         COMMAND python3 tests/python/install_package.py --site ${CMAKE_BINARY_DIR}/python-site
                 --build-dir ${CMAKE_BINARY_DIR}/python-build
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(python_install PROPERTIES FIXTURES_SETUP python_pkg LABELS python
                     TIMEOUT 900)
add_test(NAME python_package
         COMMAND python3 tests/python/run_pytest.py -m "not slow" tests/python
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(python_package PROPERTIES FIXTURES_REQUIRED python_pkg LABELS python
                     TIMEOUT 600 ENVIRONMENT "${WPK_PY_ENV}")
add_test(NAME python_torchvision
         COMMAND python3 tests/python/run_pytest.py -m slow tests/python
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(python_torchvision PROPERTIES FIXTURES_REQUIRED python_pkg
                     LABELS "slow;torchvision;python" TIMEOUT 1800 SKIP_RETURN_CODE 77
                     ENVIRONMENT "${WPK_PY_ENV}")
