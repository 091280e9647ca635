// walbus/export.h: WALBUS_EXPORT marks what the shared library exports.
//
// The library is compiled with hidden visibility, so only the public API
// (the classes and functions marked WALBUS_EXPORT in these headers) is
// visible from libwalbus.so. On Windows the same mark is dllexport while
// building walbus (WALBUS_BUILDING), nothing for users of the static
// library (WALBUS_STATIC_DEFINE, set by the walbus::walbus_static target)
// and dllimport for users of the DLL.
#ifndef WALBUS_EXPORT_H_
#define WALBUS_EXPORT_H_

#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(WALBUS_STATIC_DEFINE)
#define WALBUS_EXPORT
#elif defined(WALBUS_BUILDING)
#define WALBUS_EXPORT __declspec(dllexport)
#else
#define WALBUS_EXPORT __declspec(dllimport)
#endif
#elif defined(__GNUC__) && defined(__cplusplus)
// The standard attribute syntax, so that it can follow [[nodiscard]].
#define WALBUS_EXPORT [[gnu::visibility("default")]]
#elif defined(__GNUC__)
#define WALBUS_EXPORT __attribute__((visibility("default")))
#else
#define WALBUS_EXPORT
#endif

#endif  // WALBUS_EXPORT_H_
