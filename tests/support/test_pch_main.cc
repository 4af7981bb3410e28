// The program that owns the tests' precompiled header (test_pch.h). GCC
// takes a precompiled header only where the flags match the ones it was made
// with; an executable has the tests' own (-fPIE, -Og), a library would not.
// It is built, never run.
int main() { return 0; }
