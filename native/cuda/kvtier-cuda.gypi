# The CUDA addon target, included by native/binding.gyp. It exists only where
# nvcc is found (and KVTIER_CUDA is not 0), so the CPU build is unaffected
# elsewhere. The kernels are built by native/cuda/Makefile into a static
# library; node-gyp compiles only the N-API shim and links it.
#   KVTIER_CUDA_ARCH  nvcc -gencode flags (default: sm_90 SASS + compute_80 PTX)
{
  'variables': {
    'kvt_nvcc%': '<!(sh -c "[ \\"$KVTIER_CUDA\\" = 0 ] || command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true")',
  },
  'conditions': [
    ['kvt_nvcc!=""', {
      'variables': {
        'kvt_cuda_libdir%': '<!(sh <(module_root_dir)/cuda/cuda-libdir.sh <(kvt_nvcc))',
        'kvt_cuda_arch%': '<!(sh -c "echo ${KVTIER_CUDA_ARCH:--gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80}")',
      },
      'targets': [
        {
          'target_name': 'kvtier_cuda',
          'sources': ['napi/cuda-addon.cc'],
          'include_dirs': ["<!(node -p \"require('node-addon-api').include_dir\")"],
          'defines': ['NAPI_VERSION=8', 'NAPI_DISABLE_CPP_EXCEPTIONS'],
          'cflags_cc': ['-std=c++17', '-O3'],
          'cflags_cc!': ['-fno-exceptions', '-fno-rtti'],
          'actions': [
            {
              'action_name': 'kvtier_cuda_kernels',
              'inputs': ['<!@(ls -d <(module_root_dir)/cuda/Makefile <(module_root_dir)/cuda/*.cu <(module_root_dir)/cuda/*.cc <(module_root_dir)/cuda/*.h <(module_root_dir)/cuda/kernels/* <(module_root_dir)/cuda/ref/*)'],
              'outputs': ['<(module_root_dir)/cuda/build/napi/libkvtier_cuda.a'],
              'action': ['make', '-C', '<(module_root_dir)/cuda', '-j2', 'NVCC=<(kvt_nvcc)', 'BUILD=build/napi',
                         'ARCH=<(kvt_cuda_arch)', 'build/napi/libkvtier_cuda.a'],
            },
          ],
          'libraries': [
            '<(module_root_dir)/cuda/build/napi/libkvtier_cuda.a',
            '-L<(kvt_cuda_libdir)', '-lcudart_static', '-lrt', '-ldl', '-lpthread',
          ],
        },
      ],
    }],
  ],
}
