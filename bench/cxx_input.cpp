// bench/cxx_input.cpp - what the clang++ workload compiles (-fsyntax-only):
// three heavy standard headers and a little code that instantiates them.
#include <iostream>
#include <map>
#include <regex>
#include <string>

int main()
{
	std::map<std::string, int> counts;
	std::regex word("[a-z]+");
	std::string text = "the quick brown fox jumps over the lazy dog the end";
	for (auto it = std::sregex_iterator(text.begin(), text.end(), word);
	     it != std::sregex_iterator(); ++it)
		counts[it->str()]++;
	for (const auto &kv : counts)
		std::cout << kv.first << " " << kv.second << "\n";
	return 0;
}
