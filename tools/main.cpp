#include <cstdio>
int main() { std::puts("synapse"); return 0; }
