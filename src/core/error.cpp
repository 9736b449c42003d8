// Error formatting helpers shared by the check macros.
#include "ragtrain/core/error.hpp"

#include <mpi.h>

namespace ragtrain {

std::string where(const char* file, int line, const std::string& what) {
  return RT_MSG(file << ":" << line << ": " << what);
}

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return RT_MSG("MPI error " << code);
  return std::string(buf, static_cast<size_t>(len));
}

}  // namespace ragtrain
