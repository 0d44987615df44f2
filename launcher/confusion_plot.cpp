#include "launcher/confusion_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/gnuplot.h"

namespace psrun::launcher {
Result<void> plot_confusion(const worker::ClassificationReport& r, const std::string& title,
                            const std::string& png_path) {
    const std::string data_path = png_path + ".dat";
    {
        std::ofstream data(data_path);
        for (int t = 0; t < r.classes; ++t) {
            const auto& row = r.confusion[static_cast<std::size_t>(t)];
            const std::int64_t support = r.support[static_cast<std::size_t>(t)];
            for (int p = 0; p < r.classes; ++p) {
                const std::int64_t n = row[static_cast<std::size_t>(p)];
                data << p << ' ' << t << ' ' << (support ? double(n) / double(support) : 0.0) << ' ' << n << '\n';
            }
        }
        if (!data) return make_error(ErrorCode::kIo, "cannot write " + data_path);
    }
    const int side = std::max(500, 60 * r.classes + 160);
    // Counts in white on the dark cells, black elsewhere; the true classes run down the y axis.
    const std::string script = fmt::format(
        "set terminal pngcairo size {0},{1}\nset output '{2}'\nset title '{3}' noenhanced\n"
        "set xlabel 'predicted class'\nset ylabel 'true class'\nset xrange [-0.5:{4}.5]\n"
        "set yrange [{4}.5:-0.5]\nset xtics 1 out nomirror\nset ytics 1 out nomirror\nset size ratio -1\n"
        "set palette defined (0 '#ffffff', 1 '#08306b')\nset cbrange [0:1]\n"
        "set cblabel 'share of the true class'\n"
        "plot '{5}' using 1:2:3 with image notitle, "
        "'{5}' using 1:2:(sprintf('%d', $4)):($3 > 0.5 ? 0xffffff : 0) with labels tc rgb variable notitle\n",
        side, side - 60, gnuplot_quoted(png_path), gnuplot_quoted(title), r.classes - 1, gnuplot_quoted(data_path));

    auto said = run_gnuplot(script, png_path);
    std::error_code ec;
    std::filesystem::remove(data_path, ec);
    if (!said) return tl::unexpected(said.error());
    return {};
}

}  // namespace psrun::launcher
