# Splits compute-sanitizer's printed reports into hyllm's own and those inside
# NVIDIA's libraries (cuBLASLt's kernels, NCCL's host calls), which hyllm does
# not own. Prints "own library printed".
#   racecheck: "Error: Race reported between <kind> access at SITE+0x..."
#   memcheck / initcheck: a report line, then "    at SITE+0x..."
#   API errors ("Program hit ..."): library when a library frame comes first
function library_site(site) {
  return site ~ /^(void )?(nvjet_|cublasLt|cublas|cutlass|nccl)/
}
/Race reported between/ {
  site = $0; sub(/.* access at /, "", site); sub(/\+0x.*/, "", site)
  printed++; if (library_site(site)) lib++; else own++
  next
}
/^========= (Invalid|Uninitialized|Misaligned|Barrier|Host API memory access)/ { pending = 1; next }
pending && /^=========     at / {
  site = $0; sub(/^=========     at /, "", site); sub(/\+0x.*/, "", site)
  printed++; if (library_site(site)) lib++; else own++
  pending = 0; next
}
pending && /Saved host backtrace/ { printed++; own++; pending = 0; next }
/^========= Program hit/ { api = 1; next }
api && /Host Frame:/ && !/libcuda\.so/ {
  printed++; if ($0 ~ /lib(nccl|cublas|cublasLt)\.so/) lib++; else own++
  api = 0; next
}
END { printf "%d %d %d\n", own + 0, lib + 0, printed + 0 }
