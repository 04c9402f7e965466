// A click on a figure of the gallery opens it at full size (Sphinx links only the figures
// that a page scales; sphinx-gallery's are shrunk to the column by CSS and were not linked).
document.addEventListener("DOMContentLoaded", () => {
  for (const img of document.querySelectorAll(".bd-article img.sphx-glr-single-img, .bd-article img.sphx-glr-multi-img")) {
    if (img.closest("a")) continue;
    const link = document.createElement("a");
    link.href = img.getAttribute("src");
    link.title = "Open the figure at full size";
    img.replaceWith(link);
    link.append(img);
  }
});
